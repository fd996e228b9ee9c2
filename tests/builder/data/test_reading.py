"""builder/data/reading.py: the DataModule reads what its reading says (the seam a third graph's data
takes), and each graph hands it the reading its model needs."""

import numpy as np
import torch

from aiayn.builder.data.collate import Batch
from aiayn.builder.data.dataset import TranslationDataset
from aiayn.builder.data.reading import Reading
from aiayn.builder.data.spec import make_datamodule
from aiayn.builder.graph import graph_of
from aiayn.builder.graphs.readings import JointReading, TextReading
from tests.builder.data.test_data_datamodule import make
from tests.conftest import EXPERIMENTS, load_experiment


class TargetsOnly(Reading):
    """A reading of the target file alone (both sides), every other training line, in rows of its own."""

    specials = ("<mask>",)

    def files(self, paths):
        return paths[1], paths[1]

    def dataset(self, data, split, src, tgt):
        return TranslationDataset(tgt, tgt, np.arange(0, len(tgt), 2 if split == "train" else 1), source=False)

    def collate(self, tokenizer, pad_to_multiple):
        return lambda examples: Batch(
            src=torch.zeros(len(examples), 0, dtype=torch.long),
            tgt_in=torch.tensor([[tokenizer.tokens().index("<mask>")]] * len(examples)),
            tgt_out=torch.tensor([[len(e.tgt)] for e in examples]),
            ids=torch.tensor([e.id for e in examples]),
            n_src_tokens=0,
            n_tgt_tokens=len(examples),
            tgt_rows=torch.arange(len(examples)),
            src_rows=None,
        )

    def eval_lengths(self, dataset):
        return dataset.src_lengths * 0, dataset.tgt_lengths * 0 + 1  # a row is one token


def test_the_datamodule_reads_the_files_datasets_tokens_and_batches_its_reading_says(tmp_path):
    data = make(tmp_path / "run", reading=TargetsOnly())
    data.setup("fit")
    assert all(src == tgt and tgt.suffix == ".de" for src, tgt in data.paths.values())
    assert data.tgt_tokenizer.tokens().index("<mask>") is not None  # the reading's special, trained in
    assert len(data.datasets["train"]) == 200 and len(data.datasets["valid"]) == 50
    [batch] = list(data.val_dataloader())  # 50 rows of one token: one batch of the 160 allowed
    assert sorted(batch.ids.tolist()) == list(range(50)) and batch.tgt_in.unique().tolist() == [
        data.tgt_tokenizer.tokens().index("<mask>")
    ]
    lengths = data.datasets["valid"].tgt_lengths
    assert [int(lengths[i]) for i in batch.ids] == batch.tgt_out[:, 0].tolist()


def test_each_graph_hands_the_datamodule_its_reading(tmp_path):
    pairs = make_datamodule(load_experiment(EXPERIMENTS / "demo.yaml"), tmp_path / "a", max_tokens=100)
    assert graph_of(load_experiment(EXPERIMENTS / "demo.yaml")).reading(load_experiment(EXPERIMENTS / "demo.yaml")) is None
    assert type(pairs.reading) is Reading and pairs.reading.on_target() is pairs.reading
    lm = make_datamodule(load_experiment(EXPERIMENTS / "lm" / "demo.yaml"), tmp_path / "b", max_tokens=100)
    assert isinstance(lm.reading, TextReading) and (lm.reading.side, lm.reading.block_size) == ("en", None)
    spec = load_experiment(
        EXPERIMENTS / "lm" / "demo.yaml",
        ["data.side=null", "data.max_len=60", "train.source_loss=true", "model.source_mask=prefix"],
    )
    joint = make_datamodule(spec, tmp_path / "c", max_tokens=100).reading
    assert isinstance(joint, JointReading) and (joint.layout.source_loss, joint.layout.prefix) == (True, True)
    assert (joint.on_target().layout.source_loss, joint.on_target().layout.prefix) == (False, True)  # evaluate's perplexity


def test_one_languages_text_trains_the_tokenizer_once_a_line(tmp_path):
    """A reading of one file for both sides trains on each line once: counted twice, a pair seen
    once would pass min_frequency 2, and the vocabulary would grow past what the text has."""
    from aiayn.builder.data.bpe import train_tokenizer

    data = make(tmp_path / "run", reading=TargetsOnly(), vocab_size=4000)
    data.prepare_tokenizers()
    lines = (tmp_path / "run" / "data" / "train.de").read_text().splitlines()
    once = train_tokenizer(lambda: iter(lines), 4000, min_frequency=2, specials=("<mask>",))
    twice = train_tokenizer(lambda: iter(lines + lines), 4000, min_frequency=2, specials=("<mask>",))
    assert data.tgt_tokenizer.tokens() == once.tokens() and len(once.tokens()) < len(twice.tokens()) < 4000

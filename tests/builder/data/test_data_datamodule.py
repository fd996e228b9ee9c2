"""builder.data.datamodule: the demo and file corpora end to end, and resuming inside Lightning."""

import warnings
from types import SimpleNamespace

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from torch import nn

from aiayn.builder.data import datamodule as datamodule_module
from aiayn.builder.data.bpe import FastTokenizer, train_tokenizer
from aiayn.builder.data.corpus import read_lines
from aiayn.builder.data.datamodule import TranslationDataModule
from aiayn.builder.data.spec import make_datamodule
from aiayn.builder.data.tokenizer import Tokenizer, training_sample
from aiayn.builder.errors import UserError
from aiayn.schemas.data import StaticShapesSpec
from aiayn.schemas.tokenizer import BpeTokenizerSpec
from tests.conftest import EXPERIMENTS, load_experiment, registry

DEMO = (400, 50, 40)


def make(run_dir, **kw) -> TranslationDataModule:
    args = {
        "run_dir": run_dir,
        "demo": DEMO,
        "vocab_size": 300,
        "max_tokens": 160,
        "cache_dir": run_dir.parent / "cache",
        "seed": 3,
    } | kw
    return TranslationDataModule(**args, registry=registry())


@pytest.fixture
def dm(tmp_path):
    dm = make(tmp_path / "run")
    dm.setup("fit")
    return dm


def test_demo_setup(dm, tmp_path):
    run = tmp_path / "run"
    assert sorted(p.name for p in (run / "data").iterdir()) == [
        "test.de",
        "test.en",
        "train.de",
        "train.en",
        "valid.de",
        "valid.en",
    ]
    assert Tokenizer.load(run / "tokenizer.json", registry()) == dm.src_tokenizer
    assert dm.src_tokenizer is dm.tgt_tokenizer and dm.vocab_size == dm.src_vocab_size == 300
    assert dm.filter_counts == {"kept": 400, "too_long": 0, "too_short": 0}
    assert {k: len(v) for k, v in dm.datasets.items()} == {"train": 400, "valid": 50, "test": 40}
    assert len(list((tmp_path / "cache").iterdir())) == 3
    assert dm.longest == max(max(ds.src_lengths.max(), ds.tgt_lengths.max() + 1) for ds in dm.datasets.values())


def test_train_loader_batches(dm):
    loader = dm.train_dataloader()
    batches = list(loader)
    assert len(batches) == len(loader)
    assert sorted(i for b in batches for i in b.ids.tolist()) == list(range(400))
    for b in batches:
        assert b.src.numel() <= 160 and b.tgt_in.numel() <= 160
        assert b.tgt_in.shape == b.tgt_out.shape
        assert (b.tgt_in[:, 0] == 1).all() and ((b.tgt_out == 2).sum(1) == 1).all()


def test_valid_loader_is_deterministic_and_order_is_recoverable(dm, tmp_path):
    first = [b.ids.tolist() for b in dm.val_dataloader()]
    assert first == [b.ids.tolist() for b in dm.val_dataloader()]
    by_id = {}
    for b in dm.val_dataloader():
        for i, row in zip(b.ids.tolist(), b.tgt_out.tolist()):
            by_id[i] = dm.tgt_tokenizer.decode(row)
    assert [by_id[i] for i in range(50)] == read_lines(tmp_path / "run" / "data" / "valid.de")


def test_resume_reuses_tokenizer_and_cache(dm, tmp_path, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("the tokenizer was trained again")

    def no_encoding(self, texts):
        raise AssertionError("the corpus was tokenized again")

    monkeypatch.setattr(datamodule_module, "make_tokenizers", no_training)
    monkeypatch.setattr(FastTokenizer, "encode_batch", no_encoding)
    again = make(tmp_path / "run", vocab_size=1000)  # the run's saved tokenizer wins
    again.setup("fit")
    assert again.src_tokenizer == dm.src_tokenizer and again.vocab_size == 300


def test_files_with_separate_vocabularies(dm, tmp_path):
    data = tmp_path / "run" / "data"
    files = TranslationDataModule(
        registry=registry(),
        run_dir=tmp_path / "run2",
        train=(data / "train.en", data / "train.de"),
        valid=(data / "valid.en", data / "valid.de"),
        vocab_size=200,
        shared_vocab=False,
        max_tokens=100,
        max_len=9,
    )
    files.setup("fit")
    assert sorted(p.name for p in (tmp_path / "run2").iterdir()) == ["tokenizer.src.json", "tokenizer.tgt.json"]
    assert files.src_tokenizer != files.tgt_tokenizer
    assert files.src_vocab_size == 200 and files.vocab_size == 200
    counts = files.filter_counts
    assert counts["too_long"] > 0 and counts["kept"] + counts["too_long"] == 400
    assert max(files.datasets["train"].src_lengths.max(), files.datasets["train"].tgt_lengths.max()) <= 9
    assert len(files.datasets["valid"]) == 50  # evaluation splits are never filtered
    with pytest.raises(UserError, match="no test split was given"):
        files.test_dataloader()


def test_tokenizer_trains_on_a_sample_only_of_a_larger_split(dm, tmp_path):
    data = tmp_path / "run" / "data"
    src, tgt = read_lines(data / "train.en"), read_lines(data / "train.de")
    keep = training_sample(400, 100).tolist()
    for sample, trained_on in ((400, src + tgt), (None, src + tgt), (100, [src[i] for i in keep] + [tgt[i] for i in keep])):
        other = make(tmp_path / f"run-{sample}", tokenizer=BpeTokenizerSpec(train_sample_pairs=sample))
        tokenizer, _ = other.prepare_tokenizers()
        assert tokenizer == train_tokenizer(trained_on, 300)
        assert (tokenizer == dm.src_tokenizer) == (sample != 100)  # 400 pairs: every one, as before


def test_copies_a_given_tokenizer(dm, tmp_path):
    given = Tokenizer.load(tmp_path / "run" / "tokenizer.json", registry())
    other = make(tmp_path / "run3", tokenizers=(given, given))
    other.setup("fit")
    assert Tokenizer.load(tmp_path / "run3" / "tokenizer.json", registry()) == dm.src_tokenizer
    separate = make(tmp_path / "run4", shared_vocab=False, tokenizers=(given, dm.src_tokenizer))
    assert separate.prepare_tokenizers() == (given, dm.src_tokenizer)
    assert [p.name for p in sorted((tmp_path / "run4").glob("tokenizer*.json"))] == ["tokenizer.src.json", "tokenizer.tgt.json"]


def test_user_errors(tmp_path):
    pair = (tmp_path / "a.en", tmp_path / "a.de")
    with pytest.raises(UserError) as e:
        make(tmp_path, train=pair)
    assert str(e.value) == "data: give either the training files or the demo corpus sizes, not both or neither"
    two = (train_tokenizer(["a house"], 20), train_tokenizer(["ein haus"], 20))
    with pytest.raises(UserError) as e:
        make(tmp_path, tokenizers=two)
    assert str(e.value) == "data: the given tokenizers number their tokens differently, and shared_vocab: true needs one id space"
    with pytest.raises(UserError, match="the demo corpus makes its own valid and test splits"):
        make(tmp_path, valid=pair)
    all_long = make(tmp_path / "run", max_len=2)
    with pytest.raises(UserError) as e:
        all_long.setup("fit")
    assert str(e.value).startswith("data: the length filter removed all 400 training pairs of ")
    assert str(e.value).endswith("shorter than min_len=1 tokens); raise max_len or lower min_len")


class Recorder(L.LightningModule):
    """Records the line ids of every training batch; learns nothing."""

    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab_size, 2)
        self.seen: list[list[int]] = []

    def training_step(self, batch, batch_idx):
        self.seen.append(batch.ids.tolist())
        return self.emb(batch.src).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)


def fit(dm: TranslationDataModule, max_steps: int, ckpt_path=None, every=None) -> Recorder:
    dm.prepare_tokenizers()
    model = Recorder(dm.vocab_size)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=max_steps,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        use_distributed_sampler=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        default_root_dir=dm.run_dir,
        # a checkpoint written during the epoch, as the run's periodic checkpoints are
        callbacks=[ModelCheckpoint(dirpath=dm.run_dir / "ckpt", filename="{step}", every_n_train_steps=every, save_top_k=-1)],
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*num_workers.*")
        trainer.fit(model, datamodule=dm, ckpt_path=ckpt_path)
    return model


@pytest.mark.filterwarnings(
    "ignore:.*(validation_step|callbacks used to create the checkpoint|LeafSpec|exists and is not empty).*"
)
@pytest.mark.filterwarnings("error:.*resuming from a checkpoint")
@pytest.mark.parametrize(("num_workers", "stop"), [(0, 25), (2, 25), (0, 50)])
def test_lightning_resumes_mid_epoch_where_it_stopped(tmp_path, num_workers, stop):
    dm = make(tmp_path / "ref", num_workers=num_workers)
    reference = fit(dm, max_steps=60)
    assert len(dm.train_dataloader()) == 42  # 60 steps: all of epoch 0 and part of epoch 1
    assert sorted(i for b in reference.seen[:42] for i in b) == list(range(400))

    first = fit(make(tmp_path / "run", num_workers=num_workers), max_steps=stop, every=stop)
    ckpt = tmp_path / "run" / "ckpt" / f"step={stop}.ckpt"
    state = torch.load(ckpt, weights_only=False)["loops"]["fit_loop"]["state_dict"]["combined_loader"][0]
    assert (state["epoch"], state["consumed"]) == divmod(stop, 42)

    second = fit(make(tmp_path / "run", num_workers=num_workers), max_steps=60, ckpt_path=ckpt)
    assert len(first.seen) == stop and len(second.seen) == 60 - stop
    assert first.seen + second.seen == reference.seen


class SaveInsideStep(L.Callback):
    """Saves a checkpoint inside optimizer step `step` + 1, between its forward and backward, as
    Lightning's own SLURM auto-requeue does when the time-limit signal lands there (aiayn's
    trainer saves at the step's end instead: builder/train/requeue.py)."""

    def __init__(self, step: int, path) -> None:
        self.step, self.path = step, path

    def on_before_backward(self, trainer, task, loss):
        if trainer.global_step == self.step:
            trainer.save_checkpoint(self.path)


@pytest.mark.filterwarnings(
    "ignore:.*(validation_step|callbacks used to create the checkpoint|LeafSpec|exists and is not empty).*"
)
@pytest.mark.parametrize("stop", [25, 41])
def test_a_save_inside_a_step_resumes_at_that_step(tmp_path, stop):
    reference = fit(make(tmp_path / "ref"), max_steps=60)
    dm = make(tmp_path / "run")
    dm.prepare_tokenizers()
    first = Recorder(dm.vocab_size)
    ckpt = tmp_path / "inside.ckpt"
    trainer = L.Trainer(
        accelerator="cpu", devices=1, max_steps=stop + 3, logger=False, enable_progress_bar=False, enable_model_summary=False,
        use_distributed_sampler=False, limit_val_batches=0, num_sanity_val_steps=0, default_root_dir=dm.run_dir,
        enable_checkpointing=False, callbacks=[SaveInsideStep(stop, ckpt)],
    )  # fmt: skip
    trainer.fit(first, datamodule=dm)
    state = torch.load(ckpt, weights_only=False)
    assert state["global_step"] == stop
    assert (state["loops"]["fit_loop"]["state_dict"]["combined_loader"][0]["consumed"]) == stop  # not stop + 1
    second = fit(make(tmp_path / "run"), max_steps=60, ckpt_path=ckpt)
    assert first.seen[: stop + 1] == reference.seen[: stop + 1]
    assert second.seen == reference.seen[stop:60]  # the step it was inside is taken again, then the rest


def test_static_shapes_make_the_training_batches_of_a_few_shapes(tmp_path, capsys):
    dm = make(tmp_path / "run", static_shapes=StaticShapesSpec(num_buckets=3), max_tokens=300)
    dm.setup("fit")
    batches = list(dm.train_dataloader())
    assert sorted(i for b in batches for i in b.ids.tolist() if i >= 0) == list(range(400))
    assert {tuple(b.src.shape) for b in batches} == {s.shape for s in dm.shapes} and len(dm.shapes) == 3
    assert {len(b.tgt_rows) for b in batches} == {s.tgt_tokens for s in dm.shapes}
    assert all(b.src.numel() <= 300 for b in batches)
    printed = capsys.readouterr().out.splitlines()[-1]
    assert printed == "static shapes: batches (rows x width; packed source, target tokens) " + ", ".join(
        f"{s.rows}x{s.width} ({s.src_tokens}, {s.tgt_tokens})" for s in dm.shapes
    )
    assert {tuple(b.src.shape) for b in dm.val_dataloader()} != {s.shape for s in dm.shapes}  # evaluation as always


def fake_trainer(world_size: int, rank: int) -> SimpleNamespace:
    return SimpleNamespace(world_size=world_size, global_rank=rank, training=True)


def test_loaders_split_across_the_trainers_ranks(dm):
    per_rank, batches = [], []
    for rank in range(3):
        dm.trainer = fake_trainer(3, rank)
        train, valid = dm.train_dataloader(), dm.val_dataloader()
        assert (train.sampler.num_replicas, train.sampler.rank) == (3, rank)
        per_rank.append(([i for b in train for i in b.ids.tolist()], [i for b in valid for i in b.ids.tolist()]))
        batches.append(len(train))
    assert len(set(batches)) == 1 and batches[0] > 1  # every rank steps alike (DDP's collectives wait for all)
    assert sorted(i for t, _ in per_rank for i in t) == list(range(400))
    assert sorted(i for _, v in per_rank for i in v) == list(range(50))  # no duplicate scored twice


@pytest.mark.parametrize(("override", "expected"), [([], 1_000_000), (["data.tokenizer.train_sample_pairs=5"], 5),
                                                    (["data.tokenizer.train_sample_pairs=null"], None)])  # fmt: skip
def test_experiment_sets_the_tokenizer_sample(tmp_path, override, expected):
    spec = load_experiment(EXPERIMENTS / "demo.yaml", override)
    assert make_datamodule(spec, tmp_path, max_tokens=100).tokenizer.train_sample_pairs == expected


def test_an_experiment_with_source_eos_trains_and_scores_on_sources_that_end_with_it(tmp_path):
    overrides = [
        "data.n_train=200",
        "data.n_valid=20",
        "data.n_test=20",
        "dims.vocab_size=200",
        f"data.cache_dir={tmp_path / 'cache'}",
    ]
    batches = {}
    for eos in (False, True):
        spec = load_experiment(EXPERIMENTS / "demo.yaml", [*overrides, f"model.source_eos={str(eos).lower()}"])
        dm = make_datamodule(spec, tmp_path / str(eos), max_tokens=400)
        dm.prepare_data()
        dm.setup("fit")
        batches[eos] = [next(iter(dm.train_dataloader())), next(iter(dm.val_dataloader()))]
    for plain, with_eos in zip(batches[False], batches[True]):
        ends = with_eos.src.gather(1, (with_eos.src.ne(0).sum(1) - 1)[:, None])[:, 0]
        assert ends.eq(Tokenizer.eos_id).all()  # every source's last real token
        assert with_eos.n_src_tokens == with_eos.src.ne(0).sum()
    valid_plain, valid_eos = batches[False][1], batches[True][1]  # the same pairs, in the same order
    assert valid_eos.ids.tolist() == valid_plain.ids.tolist()
    assert valid_eos.n_src_tokens == valid_plain.n_src_tokens + len(valid_plain.ids)

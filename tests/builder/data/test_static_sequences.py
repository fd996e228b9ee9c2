"""Static shapes for a decoder-only model's rows (builder/graphs/static_sequences.py): a decoder-only
translation's `<s> x <sep> y` (the source read causally or as a prefix, its loss or not) and a
language model's sentences take a few fixed shapes, and each batch's loss is the loss of the same
examples batched without them; fillers and padded loss rows count nothing."""

import pytest
import torch

from aiayn.builder.data.collate import TranslationCollator
from aiayn.builder.data.spec import make_datamodule
from aiayn.builder.graphs.joint import JointCollator
from aiayn.builder.model.build import build_model
from aiayn.builder.model.loss import batch_loss, smoothed_nll_fusable
from aiayn.builder.train.compiled import StaticStepLoss
from tests.builder.cli.test_bad_inputs import cli
from tests.builder.train.test_compile_static import Counting
from tests.conftest import EXPERIMENTS, load_experiment

LM = EXPERIMENTS / "lm" / "demo.yaml"
SMALL = ["data.n_train=600", "data.max_len=40", "dims.N=2", "dims.d_model=32", "dims.h=2", "dims.d_k=16", "dims.d_v=16",
         "dims.d_ff=64", "dims.vocab_size=300", "data.static_shapes={num_buckets: 3}"]  # fmt: skip
TRANSLATION = ["data.side=null", *SMALL]


@pytest.mark.parametrize(
    "overrides",
    [TRANSLATION, [*TRANSLATION, "model.source_mask=prefix"], [*TRANSLATION, "train.source_loss=true"], SMALL],
    ids=["causal", "prefix", "source-loss", "language-model"],
)
def test_each_static_batch_takes_a_bucket_shape_and_the_loss_of_its_examples(overrides, tmp_path):
    spec = load_experiment(LM, overrides)
    data = make_datamodule(spec, tmp_path / "run", max_tokens=400)
    data.prepare_data()
    data.setup("fit")
    loader = data.train_dataloader()
    shapes = {(s.rows, s.width): s.tgt_tokens for s in data.shapes}
    assert len(shapes) == 3
    torch.manual_seed(0)
    model = build_model(spec).eval()
    ds, seen = data.datasets["train"], 0
    layout = getattr(data.reading, "layout", None)  # a translation's JointLayout; a language model has none
    dynamic = JointCollator(layout, sep_id=data.tgt_tokenizer.sep_id) if layout is not None else None
    for indices, batch in zip(loader.batches.epoch_batches(), loader):
        assert shapes[tuple(batch.tgt_in.shape)] == len(batch.tgt_rows) and batch.src.shape == (len(batch.ids), 0)
        assert (batch.ids >= 0).sum() == len(indices) and (batch.prefix is not None) == (layout is not None and layout.prefix)
        examples = ds[indices]  # the same examples batched as without static shapes
        alone = dynamic(examples) if dynamic is not None else TranslationCollator(pad_id=0, bos_id=1, eos_id=2)(examples)
        with torch.no_grad():
            loss, nll, count = batch_loss(model, batch, eps=0.1, pad_id=0)
            expected = batch_loss(model, alone, eps=0.1, pad_id=0)
        assert int(count) == int(expected[2]) == batch.n_tgt_tokens
        torch.testing.assert_close((loss, nll), expected[:2], rtol=1e-5, atol=1e-4)
        seen += len(indices)
    assert seen == len(ds)


def test_a_decoder_only_translation_trains_with_static_shapes(tmp_path):
    code, out, err = cli("train", LM, *TRANSLATION, "trainer.max_steps=2", "trainer.val_check_interval=null",
                         "trainer.check_val_every_n_epoch=null", f"data.cache_dir={tmp_path / 'cache'}", "--runs", tmp_path / "runs")  # fmt: skip
    assert code == 0, err
    assert "static shapes: batches (rows x width; packed source, target tokens) " in out + err


def test_the_static_step_of_a_decoder_only_translation_compiles_once_per_shape(tmp_path):
    torch._dynamo.reset()
    spec = load_experiment(LM, [*TRANSLATION, "model.source_mask=prefix", "model.dropout=0.0"])
    data = make_datamodule(spec, tmp_path / "run", max_tokens=400)
    data.prepare_data()
    data.setup("fit")
    batches = list(data.train_dataloader())
    torch.manual_seed(0)
    model = build_model(spec).eval()
    backend = Counting()
    step = StaticStepLoss(model, eps=0.1, pad_id=0, fused=False, backend=backend)
    for batch in batches:  # the epoch: the prefix lengths are a tensor input, not a constant to recompile for
        compiled = step(batch)
        eager = batch_loss(model, batch, eps=0.1, pad_id=0, loss=smoothed_nll_fusable)
        torch.testing.assert_close(compiled[:2], eager[:2], rtol=1e-5, atol=1e-4)
    assert backend.graphs == len({tuple(b.tgt_in.shape) for b in batches}) == 3

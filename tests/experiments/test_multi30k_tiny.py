"""experiments/multi30k/tiny.yaml is the Multi30k literature's Transformer-tiny as its published
scripts run it; tiny-cased.yaml the same model on the raw, cased text."""

import pytest

from aiayn.builder.data.bpe import train_tokenizer
from aiayn.builder.data.text import TextPipeline
from aiayn.builder.decode.metrics import Scoring
from aiayn.builder.model.size import count_params
from aiayn.builder.train.schedule import noam_lr
from tests.conftest import EXPERIMENTS, SHARED_DATA, load_experiment, registry


def test_tiny_is_the_literature_recipe():
    spec = load_experiment(EXPERIMENTS / "multi30k" / "tiny.yaml")
    m, t, d = spec.model, spec.train, spec.data
    assert (m.encoder.num_layers, m.decoder.num_layers, m.d_model) == (4, 4, 128)
    assert (t.label_smoothing, t.optimizer.betas, t.optimizer.eps, spec.trainer.max_steps) == (0.1, (0.9, 0.98), 1e-8, 8000)
    assert t.tokens_per_step == 2 * 4096  # --max-tokens 4096 on two GPUs
    assert (t.average_last, t.checkpoint.every_n_epochs, t.checkpoint.keep_last) == (10, 1, 10)
    assert (t.early_stopping.monitor, t.early_stopping.patience, spec.trainer.check_val_every_n_epoch) == ("loss/valid", 10, 1)
    assert (spec.decode.beam, spec.decode.length_penalty, spec.decode.alpha, spec.decode.max_len_b) == (5, "fairseq", 1.0, 200)
    assert m.embedding.share == "all"
    # fairseq's: LayerNorm eps 1e-5 (torch's default), sines then cosines, a source </s>, at most 200 output tokens
    assert {stack.add_norm.norm.eps for stack in m.stacks.values()} == {1e-5} and m.positional.layout == "concatenated"
    assert m.source_eos and (spec.decode.max_len_a, spec.decode.max_len_b) == (0, 200)
    assert [s.type for s in d.pipeline] == ["lowercase", "normalize_punctuation", "moses_tokenize"]
    assert d.pipeline[-1].escape and d.tokenizer.merges == 10000
    assert Scoring.of(d) == Scoring(tokenized=True, lowercase=True)
    assert count_params(m) == 2_613_504  # 10,066 x 128 shared embedding + the layers
    # inverse-sqrt with peak 0.005 after 2000 warmup steps, as fairseq's inverse_sqrt scheduler
    s = t.lr_schedule
    for step in (1, 500, 2000, 4000, 8000):
        expected = 0.005 * min(step / 2000, (2000 / step) ** 0.5)
        assert noam_lr(step, d_model=128, warmup_steps=s.warmup_steps, factor=s.factor) == pytest.approx(expected, rel=1e-4)


def test_the_cased_recipe_is_the_same_model_on_raw_text():
    spec = load_experiment(EXPERIMENTS / "multi30k" / "tiny-cased.yaml")
    assert spec.data.pipeline == () and spec.data.tokenizer.merges is None and Scoring.of(spec.data) == Scoring()
    assert count_params(spec.model) == 2_349_056


@pytest.mark.skipif(not (SHARED_DATA / "multi30k").is_dir(), reason=f"no Multi30k at {SHARED_DATA} (set $AIAYN_DATA)")
def test_ten_thousand_merges_on_the_literatures_text_give_the_recipes_vocabulary():
    spec = load_experiment(EXPERIMENTS / "multi30k" / "tiny.yaml")
    texts = []
    for lang in ("en", "de"):
        pipeline = TextPipeline(spec.data.pipeline, lang, registry())
        texts += pipeline.lines((SHARED_DATA / "multi30k" / f"train.{lang}").read_text(encoding="utf-8").split("\n")[:-1])
    tokenizer = train_tokenizer(texts, 0, merges=spec.data.tokenizer.merges)
    assert (tokenizer.merges, tokenizer.vocab_size) == (10_000, spec.model.embedding.vocab_size) == (10_000, 10_066)

"""experiments/multi30k/tiny.yaml is the Multi30k literature's Transformer-tiny in our terms."""

import pytest

from aiayn.builder.model.size import count_params
from aiayn.builder.run.config import load_experiment
from aiayn.builder.train.schedule import noam_lr
from tests.conftest import EXPERIMENTS


def test_tiny_is_the_literature_recipe():
    spec = load_experiment(EXPERIMENTS / "multi30k" / "tiny.yaml")
    m, t = spec.model, spec.train
    assert (m.encoder.num_layers, m.decoder.num_layers, m.d_model) == (4, 4, 128)
    assert (t.label_smoothing, t.optimizer.betas, t.tokens_per_step, spec.trainer.max_steps) == (0.1, (0.9, 0.98), 8000, 8000)
    assert (t.average_last, spec.decode.beam, m.embedding.share) == (10, 5, "all")
    assert count_params(m) == 2_349_056
    # inverse-sqrt with peak 0.005 after 2000 warmup steps, as fairseq's inverse_sqrt scheduler
    s = t.lr_schedule
    for step in (1, 500, 2000, 4000, 8000):
        expected = 0.005 * min(step / 2000, (2000 / step) ** 0.5)
        assert noam_lr(step, d_model=128, warmup_steps=s.warmup_steps, factor=s.factor) == pytest.approx(expected, rel=1e-4)

"""The variants sweeps: the Multi30k one lists its trials with their parameter counts; the
demo-scale one trains (shortened) and `aiayn results` tells its variants apart."""

import contextlib
import io

import pytest

from aiayn.builder.cli import main
from tests.conftest import EXPERIMENTS

VARIANTS = ["base", "rope", "alibi", "t5-bias", "rmsnorm", "pre-norm", "swiglu", "gqa"]


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


def test_the_multi30k_variants_sweep_lists_its_trials_with_their_parameters(tmp_path):
    code, out = run("sweep", str(EXPERIMENTS / "multi30k" / "variants.sweep.yaml"), "--runs", str(tmp_path), "--dry-run")
    assert code == 0
    rows = {line.split()[0]: int(line.split()[1].replace(",", "")) for line in out.splitlines()[2:-1]}
    assert list(rows) == [f"{v}-seed{s}" for v in VARIANTS for s in (1, 2, 3)]
    base = rows["base-seed1"]
    assert rows["rope-seed1"] == rows["alibi-seed1"] == base  # positions without parameters
    assert rows["t5-bias-seed1"] == base + 2 * 32 * 8  # a (32 buckets x 8 heads) table per stack
    assert rows["rmsnorm-seed1"] == base - 3 * (2 + 3) * 256  # no beta in 3 x (2 + 3) norms
    assert abs(rows["swiglu-seed1"] - base) < 0.001 * base  # d_ff 683 of three matrices ~ 1024 of two


@pytest.mark.slow
def test_the_demo_variants_sweep_trains_and_its_table_tells_them_apart(tmp_path):
    short = [
        "trainer.max_steps=15",
        "data.n_train=600",
        "data.n_valid=20",
        "data.n_test=20",
        "train.validation.bleu_max_sentences=20",
    ]
    code, out = run("sweep", str(EXPERIMENTS / "variants.sweep.yaml"), *short, "--runs", str(tmp_path))
    assert code == 0, out
    code, table = run("results", str(tmp_path / "demo-variants"), "--base", "base")
    assert code == 0
    lines = table.splitlines()
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    at = head.index("positional")
    assert head[at : at + 7] == [
        "positional",
        "norm",
        "ffn",
        "kv_heads",
        "rotary",
        "position_bias",
        "model.{encoder,decoder}.add_norm.placement",
    ]
    cells = {row[0]: row[at : at + 7] for row in ([c.strip() for c in line.strip("|").split("|")] for line in lines[2:10])}
    assert cells == {
        "base": ["sinusoidal", "", "", "", "", "", "post"],
        "rope": ["none", "", "", "", "1.0", "", "post"],
        "alibi": ["none", "", "", "", "", "alibi", "post"],
        "t5-bias": ["none", "", "", "", "", "t5", "post"],
        "rmsnorm": ["sinusoidal", "rms_norm", "", "", "", "", "post"],
        "pre-norm": ["sinusoidal", "", "", "", "", "", "pre"],
        "swiglu": ["sinusoidal", "", "swiglu", "", "", "", "post"],
        "gqa": ["sinusoidal", "", "", "2", "", "", "post"],
    }

"""examples/plugin, installed as a user installs it (pip, its own pyproject.toml and entry point,
not a monkeypatched registry): `aiayn schema` lists its type, `aiayn show` counts it exactly, and
`aiayn train` trains and decodes with it."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

PLUGIN = ROOT / "examples" / "plugin"
TINY = ["dims.d_model=32", "dims.d_ff=64", "dims.h=2", "dims.d_k=16", "dims.d_v=16", "dims.N=1", "dims.vocab_size=300",
        "data.n_train=400", "data.n_valid=8", "data.n_test=8", "train.tokens_per_step=800", "trainer.enable_progress_bar=false",
        "decode.beam=2", "decode.max_len_b=5", "trainer.val_check_interval=null", "train.lr_schedule.warmup_steps=2"]  # fmt: skip

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The plugin installed (a wheel built from a copy: a build writes beside its source) into a
    folder that the commands below put on their path."""
    source, site = tmp_path_factory.mktemp("plugin"), tmp_path_factory.mktemp("site")
    shutil.copytree(PLUGIN, source, dirs_exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q", "--target", str(site), str(source)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert list(site.glob("aiayn_example_plugin-0.1.0.dist-info/entry_points.txt"))
    return site


def aiayn(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site), "AIAYN_PLUGINS": "aiayn-example-plugin"}
    return subprocess.run([sys.executable, "-m", "aiayn", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_the_installed_plugin_is_in_the_schema_counted_and_trains(site, tmp_path):
    schema = aiayn(site, tmp_path, "schema")
    assert json.loads(schema.stdout)["$defs"]["ScaledAttentionSpec"]["properties"]["type"]["const"] == "scaled_attention"

    shown = aiayn(site, tmp_path, "show", str(PLUGIN / "scaled.yaml"), *TINY, "--json")
    assert shown.returncode == 0, shown.stderr
    info = json.loads(shown.stdout)
    d, h, dk, dff, V = 32, 2, 16, 64, 300
    attention = d * h * 3 * dk + h * 3 * dk + h * dk * d + d
    ffn, norms = d * dff + dff + dff * d + d, 2 * d
    assert {
        "block": "encoder.layer[0] scaled_attention",
        "params_each": attention + h,
        "count": 1,
        "params": attention + h,
    } in info["blocks"]
    assert info["params"] == V * d + (attention + h + ffn + 2 * norms) + (2 * attention + h + ffn + 3 * norms)

    trained = aiayn(
        site, tmp_path, "train", str(PLUGIN / "scaled.yaml"), *TINY, "trainer.max_steps=2", f"data.cache_dir={tmp_path / 'cache'}"
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    run = tmp_path / "runs" / "demo-scaled-attention" / "version_0"
    results = json.loads((run / "results.json").read_text())
    assert results["steps"] == 2 and results["params"] == info["params"] and results["n_sentences"] == 8

    # where the plugin is not installed, the run says which package to install
    without = subprocess.run([sys.executable, "-m", "aiayn", "translate", str(run)], input="three books\n", cwd=tmp_path,
                             capture_output=True, text=True, timeout=600)  # fmt: skip
    assert (without.returncode, without.stderr) == (
        2, f"aiayn translate: error: {run / 'checkpoints' / 'last.ckpt'} was trained with 'scaled_attention' of "
        "aiayn-example-plugin==0.1.0, which is not installed here: pip install aiayn-example-plugin==0.1.0\n",
    )  # fmt: skip
    # an averaged (slim) checkpoint keeps the run's record of its plugins
    averaged = aiayn(site, tmp_path, "average", str(run / "checkpoints" / "last.ckpt"), "-o", str(tmp_path / "avg.ckpt"))
    assert averaged.returncode == 0, averaged.stderr
    without = subprocess.run([sys.executable, "-m", "aiayn", "translate", str(tmp_path / "avg.ckpt")], input="three books\n",
                             cwd=tmp_path, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert (without.returncode, without.stderr) == (
        2, f"aiayn translate: error: {tmp_path / 'avg.ckpt'} was trained with 'scaled_attention' of "
        "aiayn-example-plugin==0.1.0, which is not installed here: pip install aiayn-example-plugin==0.1.0\n",
    )  # fmt: skip


def test_a_score_step_and_a_text_step_from_outside_train_and_decode(site, tmp_path):
    """relu_scores.py: a spec, a ScoreStep and a registration; on the decoder's self-attention
    (cached decoding) and the encoder's, with softcap beside it. nfkc.py: a text step in
    data.pipeline, applied to the input of translate too."""
    schema = json.loads(aiayn(site, tmp_path, "schema").stdout)
    assert schema["$defs"]["ReluScoresSpec"]["properties"]["type"]["const"] == "relu"
    assert schema["$defs"]["NfkcSpec"]["properties"]["type"]["const"] == "nfkc"
    relu = [
        "model.encoder.layer[0].score={type: relu}",
        "model.decoder.layer[0].score={type: relu}",
        "model.decoder.layer[0].softcap=5",
        "data.pipeline=[nfkc, lowercase]",
    ]
    trained = aiayn(site, tmp_path, "train", str(ROOT / "experiments" / "demo.yaml"), *TINY, *relu, "trainer.max_steps=2",
                    f"data.cache_dir={tmp_path / 'cache'}")  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-3000:]
    run = tmp_path / "runs" / "demo" / "version_0"
    assert "score: {type: relu}" in (run / "config.yaml").read_text() and "- {type: nfkc}" in (run / "config.yaml").read_text()
    translated = subprocess.run(
        [sys.executable, "-m", "aiayn", "translate", str(run)], input="ｔｈｒｅｅ books\n", cwd=tmp_path, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(site), "AIAYN_PLUGINS": "aiayn-example-plugin"}, timeout=600,
    )  # fmt: skip
    assert translated.returncode == 0 and len(translated.stdout.splitlines()) == 1, translated.stderr[-3000:]


def test_a_sampling_filter_from_outside_is_taken_by_name_by_the_cli(site, tmp_path):
    """min_p.py: a spec, a function and a registration; `--filter` on translate and generate
    (min_p 1 keeps the most probable token alone: sampling then translates as a beam of 1)."""
    runs = tmp_path / "runs"
    shutil.copytree(ROOT / "tests" / "fixtures" / "before-graph", runs)
    translation, lm = runs / "prefix" / "version_0", runs / "lm" / "version_0"
    source = str(translation / "data" / "valid.en")
    sampled = aiayn(
        site, tmp_path, "translate", str(translation), "-i", source, "--sampling", "--filter", "{type: min_p, min_p: 1.0}"
    )
    greedy = aiayn(site, tmp_path, "translate", str(translation), "-i", source, "--beam", "1")
    assert sampled.returncode == 0 and sampled.stdout == greedy.stdout, sampled.stderr[-3000:]
    generated = aiayn(site, tmp_path, "generate", str(lm), "-p", "a man", "--filter", "min_p", "--seed", "2", "-n", "5")
    assert generated.returncode == 0 and generated.stdout.startswith("a man"), generated.stderr[-3000:]
    refused = aiayn(site, tmp_path, "generate", str(lm), "-p", "a", "--filter", "{type: min_p, min_p: 3}")
    assert (refused.returncode, refused.stderr) == (
        2, "aiayn generate: error: --filter[0]: min_p: Input should be less than or equal to 1 (sampling filters: typical, min_p)\n"
    )  # fmt: skip

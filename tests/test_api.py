"""The Python API with `import aiayn` alone: an experiment loaded with overrides and its model
built (its count as `aiayn show` counts it), and a run loaded that translates as `aiayn
translate` does."""

import json
import os
import subprocess
import sys

import pytest

import aiayn
from tests.builder.cli.test_bad_inputs import TINY, cli
from tests.conftest import EXPERIMENTS, ROOT

DEMO = EXPERIMENTS / "demo.yaml"
LINES = ["she sold eight apples", "", "we counted two pictures"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    code, _, err = cli("train", DEMO, *TINY, "trainer.max_steps=3", f"data.cache_dir={root / 'cache'}", "--runs", root / "runs")
    assert code == 0, err
    return root / "runs" / "demo" / "version_0"


def test_an_experiment_and_its_model():
    spec = aiayn.load_experiment(DEMO, ["dims.N=1"])
    assert isinstance(spec, aiayn.ExperimentSpec) and spec.model.encoder.num_layers == 1
    model = aiayn.build_model(spec)
    shown = json.loads(cli("show", DEMO, "dims.N=1", "--json")[1])["params"]
    assert sum(p.numel() for p in model.parameters()) == shown
    with pytest.raises(aiayn.UserError) as error:
        aiayn.load_experiment(DEMO, ["dims.h=0"])
    assert "dims.h: input should be greater than 0, got 0" in str(error.value)


def test_a_run_translates_as_the_cli_does(run, tmp_path):
    translator = aiayn.load_run(run)
    assert translator.what == "step 3" and translator.checkpoint == run / "checkpoints" / "last.ckpt"
    source = tmp_path / "in.en"
    source.write_text("".join(line + "\n" for line in LINES))
    code, out, err = cli("translate", run, "--input", source)
    assert code == 0, err
    assert translator.translate(LINES) == out.splitlines()
    assert translator.translate(LINES[0]) == out.splitlines()[:1]
    code, out, _ = cli("translate", run, "--input", source, "--beam", "1", "--max-len-b", "2")
    assert translator.translate(LINES, beam=1, max_len_b=2) == out.splitlines()
    with pytest.raises(aiayn.UserError) as error:
        translator.translate(LINES, beam=0)
    assert str(error.value) == "decode: beam: input should be greater than 0, got 0"
    with pytest.raises(aiayn.UserError):
        translator.translate(LINES, detokenize=True)  # the demo's text is not tokenized


def test_the_api_needs_nothing_but_import_aiayn(run):
    """A fresh interpreter: the names resolve from the top-level package alone."""
    code = (
        "import aiayn\n"
        f"t = aiayn.load_run({str(run)!r})\n"
        "print(len(t.translate(['she sold eight apples', 'the dog'])))\n"
        f"print(aiayn.build_model(aiayn.load_experiment({str(DEMO)!r})).__class__.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True)
    assert done.stdout.splitlines() == ["2", "EncoderDecoder"], done.stderr

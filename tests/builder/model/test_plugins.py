"""Plugins through real entry points: a distribution on the path (its dist-info declares group
`aiayn.blocks`) adds a type that `aiayn schema`, `validate` and `show` see; one that fails to
import, or takes a type already registered, is a one-line message naming it, exit 2."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import EXPERIMENTS

DEMO = str(EXPERIMENTS / "demo.yaml")

SCALE_NORM = '''
from typing import Literal

import torch
from torch import nn

import aiayn


class ScaleNormSpec(aiayn.NormSpec):
    """ScaleNorm (Nguyen and Salazar 2019): g * x / ||x||, one learned scalar g."""

    type: Literal["scale_norm"] = "scale_norm"
    eps: float = 1e-5


class ScaleNorm(nn.Module):
    def __init__(self, d_model: int, eps: float) -> None:
        super().__init__()
        self.g, self.eps = nn.Parameter(torch.tensor(d_model**0.5)), eps

    def forward(self, x):
        return self.g * x / x.norm(dim=-1, keepdim=True).clamp_min(self.eps)


def register():
    aiayn.register(ScaleNormSpec, slot="norm", build=lambda spec, ctx: ScaleNorm(ctx.d_model, spec.eps), label=lambda spec: "ScaleNorm")
'''


def distribution(root: Path, name: str, module: str, code: str, entry: str) -> Path:
    """An installed distribution as importlib.metadata finds one: its module and dist-info on the path."""
    info = root / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[aiayn.blocks]\n{entry}\n")
    (root / f"{module}.py").write_text(code)
    return root


def aiayn(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, "-m", "aiayn", *args], cwd=site, env=env, capture_output=True, text=True)


def test_a_plugins_norm_is_validated_shown_and_in_the_schema(tmp_path):
    site = distribution(tmp_path, "scale-norm", "scale_norm", SCALE_NORM, "scale = scale_norm:register")
    done = aiayn(site, "show", DEMO, "model.encoder.add_norm.norm.type=scale_norm", "model.decoder.add_norm.norm.type=scale_norm", "--json")
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert {"block": "encoder.layer add & norm (ScaleNorm x2)", "params_each": 2, "count": 2, "params": 4} in info["blocks"]
    assert info["params"] == 1_053_696 - 2 * 2 * (2 * 128) - 2 * 3 * (2 * 128) + 2 * 2 + 2 * 3  # LayerNorms out, scalars in

    done = aiayn(site, "validate", DEMO, "model.encoder.add_norm.norm.type=scale_nrm")
    assert done.returncode == 2
    assert done.stderr == (
        f"aiayn validate: error: {DEMO} is not a valid experiment (1 error):\n"
        "  model.encoder.add_norm.norm: type 'scale_nrm' is not one of layer_norm, rms_norm, scale_norm; did you mean 'scale_norm'? "
        "(set on the command line: model.encoder.add_norm.norm.type=scale_nrm)\n"
    )
    done = aiayn(site, "schema")
    assert json.loads(done.stdout)["$defs"]["ScaleNormSpec"]["properties"]["type"]["const"] == "scale_norm"


def test_a_plugin_that_fails_to_import_is_one_line(tmp_path):
    site = distribution(tmp_path, "broken-plugin", "broken_plugin", "import nonexistent_dependency\n", "broken = broken_plugin:register")
    done = aiayn(site, "validate", DEMO)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "aiayn validate: error: plugin 'broken' (distribution broken-plugin): cannot import broken_plugin:register: "
        "ModuleNotFoundError: No module named 'nonexistent_dependency'\n"
    )


def test_a_plugin_that_takes_a_registered_type_is_one_line(tmp_path):
    code = SCALE_NORM.replace('Literal["scale_norm"] = "scale_norm"', 'Literal["layer_norm"] = "layer_norm"')
    site = distribution(tmp_path, "dup-plugin", "dup_plugin", code, "dup = dup_plugin:register")
    done = aiayn(site, "show", DEMO)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "aiayn show: error: plugin 'dup' (distribution dup-plugin): type 'layer_norm' is already registered by aiayn; "
        "give ScaleNormSpec another type name\n"
    )


BROKEN_NORM = '''
from typing import Literal

import aiayn


class BrokenNormSpec(aiayn.NormSpec):
    type: Literal["broken_norm"] = "broken_norm"
    groups: int = 0


def register():
    aiayn.register(BrokenNormSpec, slot="norm", build=lambda spec, ctx: ctx.d_model // spec.groups)
'''


def test_a_block_that_fails_to_build_from_a_valid_spec_is_a_bug_line_and_leaves_no_run(tmp_path):
    site = distribution(tmp_path, "broken-norm", "broken_norm", BROKEN_NORM, "broken = broken_norm:register")
    norm = "model.decoder.add_norm.norm.type=broken_norm"
    message = (
        "error: bug: the 'broken_norm' block (the decoder layer 0) failed to build from settings that validated: "
        "ZeroDivisionError: integer division or modulo by zero; please report it to the plugin that registers 'broken_norm' with the experiment\n"
    )
    for verb in ("validate", "show"):  # the spec is valid; its block fails where the model is built (counted)
        done = aiayn(site, verb, DEMO, norm)
        assert (done.returncode, done.stderr) == (70, f"aiayn {verb}: " + message)
    done = aiayn(site, "train", DEMO, norm, "trainer.max_steps=1", "--runs", str(tmp_path / "runs"))
    assert (done.returncode, done.stderr) == (70, "aiayn train: " + message)
    assert not (tmp_path / "runs").exists()

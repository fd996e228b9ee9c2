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


def register(registry):
    registry.add(ScaleNormSpec, slot="norm", build=lambda spec, ctx: ScaleNorm(ctx.d_model, spec.eps), label=lambda spec: "ScaleNorm")
'''


def distribution(root: Path, name: str, module: str, code: str, entry: str) -> Path:
    """An installed distribution as importlib.metadata finds one: its module and dist-info on the path."""
    info = root / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[aiayn.blocks]\n{entry}\n")
    (root / f"{module}.py").write_text(code)
    return root


def plugins_in(site: Path) -> str:
    """$AIAYN_PLUGINS for the distributions in `site` (tests/conftest.py loads none elsewhere)."""
    return ",".join(sorted(info.name.partition("-")[0] for info in site.glob("*.dist-info")))


def aiayn(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site), "AIAYN_PLUGINS": plugins_in(site)}
    return subprocess.run([sys.executable, "-m", "aiayn", *args], cwd=site, env=env, capture_output=True, text=True)


def test_a_plugins_norm_is_validated_shown_and_in_the_schema(tmp_path):
    site = distribution(tmp_path, "scale-norm", "scale_norm", SCALE_NORM, "scale = scale_norm:register")
    done = aiayn(
        site, "show", DEMO, "model.encoder.add_norm.norm.type=scale_norm", "model.decoder.add_norm.norm.type=scale_norm", "--json"
    )
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
    site = distribution(
        tmp_path, "broken-plugin", "broken_plugin", "import nonexistent_dependency\n", "broken = broken_plugin:register"
    )
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


BROKEN_NORM = """
from typing import Literal

import aiayn


class BrokenNormSpec(aiayn.NormSpec):
    type: Literal["broken_norm"] = "broken_norm"
    groups: int = 0


def register(registry):
    registry.add(BrokenNormSpec, slot="norm", build=lambda spec, ctx: ctx.d_model // spec.groups)
"""


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


QK_ROPE = '''
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn

import aiayn


class QKRopeAttentionSpec(aiayn.AttentionSpec):
    """aiayn's attention with a QK-norm of its own (Henry et al.'s: q and k scaled to unit length, a
    learned gain), and on self-attention aiayn's rotary after it."""

    type: Literal["qk_rope_attention"] = "qk_rope_attention"
    masked: bool = False  # the decoder's self-attention
    cross: bool = False  # the decoder's attention to the encoder

    @property
    def causal(self) -> bool:
        return self.masked

    @property
    def reads_memory(self) -> bool:
        return self.cross

    @property
    def looks_ahead(self) -> bool:
        return not (self.masked or self.cross)

    @property
    def switches(self) -> dict[str, Any]:
        return {**super().switches, "l2_qk_norm": True}


class L2QKNorm(nn.Module):
    positional = False

    def __init__(self) -> None:
        super().__init__()
        self.gain = nn.Parameter(torch.tensor(4.0))

    def forward(self, q, k, offset):
        return self.gain * F.normalize(q, dim=-1), F.normalize(k, dim=-1)


def build(spec, ctx):
    parts = aiayn.attention_parts(spec, ctx)
    rotary = [] if spec.cross else [aiayn.Rotary(d_k=spec.d_k, dims=spec.d_k)]
    attention = aiayn.CrossAttention if spec.cross else aiayn.SelfAttention
    return attention(**{**parts, "qk": [L2QKNorm(), *rotary]})


def register(registry):
    registry.add(
        QKRopeAttentionSpec, slot="sublayer", build=build, activations=aiayn.attention_activations,
        flops=lambda spec, d, length: aiayn.attention_flops(spec, d, length) + 4 * (spec.h + (spec.kv_heads or spec.h)) * spec.d_k,
    )
'''


def test_a_plugin_composes_its_qk_norm_with_aiayns_rotary_on_self_and_cross_attention(tmp_path):
    """From outside, with `import aiayn` alone: its spec subclasses the attention spec base, its
    block is aiayn's attention with its own q/k module before aiayn's Rotary; it trains, and its
    switch is a column of the results table."""
    site = distribution(tmp_path, "qk-rope", "qk_rope", QK_ROPE, "qk = qk_rope:register")
    attention = "h: 2, d_k: 16, d_v: 16"
    layers = [
        f"model.encoder.layer[0]={{type: qk_rope_attention, {attention}}}",
        f"model.decoder.layer[0]={{type: qk_rope_attention, {attention}, masked: true}}",
        f"model.decoder.layer[1]={{type: qk_rope_attention, {attention}, cross: true}}",
    ]
    small = ["dims.d_model=32", "dims.d_ff=64", "dims.N=1", "dims.vocab_size=300", "data.n_train=400", "data.n_valid=8",
             "data.n_test=8", "train.tokens_per_step=800", "trainer.max_steps=3", "trainer.val_check_interval=null",
             "trainer.enable_progress_bar=false", "decode.beam=2", "decode.max_len_b=5", "model.positional=none"]  # fmt: skip
    done = aiayn(site, "train", DEMO, *small, *layers, "--runs", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "runs" / "demo" / "version_0" / "results.json").read_text())
    paper = json.loads(aiayn(site, "show", DEMO, *small, "dims.h=2", "dims.d_k=16", "dims.d_v=16", "--json").stdout)["params"]
    assert results["paper"]["l2_qk_norm"] is True and results["params"] == paper + 3  # the paper's attentions, a gain each more
    done = aiayn(site, "results", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    head, _, row = ([c.strip() for c in line.strip("|").split("|")] for line in done.stdout.splitlines()[:3])
    assert row[head.index("l2_qk_norm")] == "True"
    done = aiayn(site, "validate", DEMO, *small, f"model.encoder.layer[0]={{type: qk_rope_attention, {attention}, cross: true}}")
    assert done.returncode == 2 and "needs an encoder output to attend to and is only allowed in the decoder" in done.stderr

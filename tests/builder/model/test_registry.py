"""A block of one's own through the public `aiayn` API alone: registered, validated (with the usual
messages), counted exactly by `aiayn show --json`, trained; and what registering refuses."""

import json
import math
import re
from pathlib import Path
from typing import Literal

import pytest
import torch
from torch import nn

import aiayn
from aiayn.builder.cli import main
from aiayn.builder.decode.checkpoint import load_checkpoint, load_for_inference, save_checkpoint
from aiayn.builder.errors import UserError, described
from aiayn.builder.model.build import build_model
from aiayn.builder.model.parts import BuildContext, build
from aiayn.builder.model.size import flops_per_token
from aiayn.builder.train.callbacks import attention_weights
from tests.conftest import EXPERIMENTS, ROOT, load_experiment, registry

DEMO = EXPERIMENTS / "demo.yaml"
D, H, DK, DV, DFF, V = 32, 2, 8, 12, 64, 300
TINY = [
    f"dims.d_model={D}",
    f"dims.d_ff={DFF}",
    f"dims.h={H}",
    f"dims.d_k={DK}",
    f"dims.d_v={DV}",
    "dims.N=1",
    f"dims.vocab_size={V}",
    "data.n_train=400",
    "data.n_valid=8",
    "data.n_test=8",
    "train.tokens_per_step=800",
    "trainer.enable_progress_bar=false",
    "decode.beam=2",
    "decode.max_len_b=5",
]


class ScaledGatedAttentionSpec(aiayn.SublayerSpec):
    """Self-attention whose output is gated per unit by sigmoid(x W_g + b_g) and scaled by one
    learned scalar (a made-up block: what matters is that aiayn knows nothing of it)."""

    type: Literal["scaled_gated_attention"] = "scaled_gated_attention"
    h: aiayn.PositiveInt
    d_k: aiayn.PositiveInt
    d_v: aiayn.PositiveInt

    @property
    def looks_ahead(self) -> bool:
        return True  # bidirectional: the encoder's

    @property
    def table3(self) -> dict[str, int]:
        return {"h": self.h, "d_k": self.d_k, "d_v": self.d_v}


class ScaledGatedAttention(aiayn.Sublayer):
    attention_maps = True

    def __init__(self, *, d_model: int, h: int, d_k: int, d_v: int) -> None:
        super().__init__()
        self.attention = aiayn.SelfAttention(d_model=d_model, h=h, d_k=d_k, d_v=d_v)
        self.gate = nn.Linear(d_model, d_model)
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, x: torch.Tensor, ctx: aiayn.LayerContext) -> torch.Tensor:
        return self.attention(x, ctx) * torch.sigmoid(self.gate(x)) * self.scale

    def attention_weights(self, x: torch.Tensor, ctx: aiayn.LayerContext) -> torch.Tensor:
        return self.attention.attention_weights(x, ctx)


def build_gated(spec: ScaledGatedAttentionSpec, ctx: aiayn.BuildContext) -> ScaledGatedAttention:
    return ScaledGatedAttention(d_model=ctx.d_model, h=spec.h, d_k=spec.d_k, d_v=spec.d_v)


def gated_flops(spec: ScaledGatedAttentionSpec, d_model: int, length: int) -> float:
    attention = (
        2 * (d_model * spec.h * (2 * spec.d_k + spec.d_v) + spec.h * spec.d_v * d_model)
        + 2 * spec.h * (spec.d_k + spec.d_v) * length
    )
    return attention + 2 * d_model * d_model


def register_gated(registry: aiayn.RegistryBuilder) -> None:
    registry.add(
        ScaledGatedAttentionSpec, slot="sublayer", build=build_gated, flops=gated_flops,
        activations=lambda spec, d: spec.h * 2 * (spec.d_k + spec.d_v) + 6 * d,
    )  # fmt: skip


@pytest.fixture
def gated() -> aiayn.Registry:
    """aiayn's own blocks and the gated attention: a registry of the test's own."""
    return registry().extended(register_gated)


def experiment(write, layer: str = f"{{type: scaled_gated_attention, h: {H}, d_k: {DK}, d_v: {DV}}}") -> Path:
    return write(
        "gated.yaml",
        f"extends: {DEMO}\nname: gated\nmodel:\n  encoder:\n    layer: [{layer}, {{type: feed_forward, d_ff: {DFF}}}]\n",
    )


def test_a_registered_sublayer_validates_counts_and_trains(gated, write, tmp_path, capsys, monkeypatch):
    path = experiment(write)
    assert main(["validate", str(path), *TINY], registry=gated) == 0
    assert capsys.readouterr().out.startswith(f"{path}: ok: gated, ")

    assert main(["show", str(path), *TINY, "--json"], registry=gated) == 0
    info = json.loads(capsys.readouterr().out)
    mha = D * H * (2 * DK + DV) + H * (2 * DK + DV) + H * DV * D + D
    gated_block = mha + D * D + D + 1  # the attention, the gate's W_g and b_g, the scale
    ffn, norm = D * DFF + DFF + DFF * D + D, 2 * D
    decoder = 2 * mha + ffn + 3 * norm
    assert info["params"] == V * D + (gated_block + ffn + 2 * norm) + decoder
    assert {
        "block": "encoder.layer[0] scaled_gated_attention",
        "params_each": gated_block,
        "count": 1,
        "params": gated_block,
    } in info["blocks"]
    assert info["paper"]["h"] == H and info["paper"]["d_k"] == DK
    spec = load_experiment(path, TINY, registry=gated)
    assert info["params"] == sum(p.numel() for p in build_model(spec.model).parameters())

    monkeypatch.chdir(tmp_path)
    overrides = [*TINY, "trainer.max_steps=2", "trainer.val_check_interval=null", f"data.cache_dir={tmp_path / 'cache'}"]
    assert main(["train", str(path), *overrides], registry=gated) == 0
    results = json.loads((tmp_path / "runs" / "gated" / "version_0" / "results.json").read_text())
    assert results["steps"] == 2 and results["params"] == info["params"]

    # the run names the plugin that registered its type; where it is gone, opening the run says so
    plugin = registry().extended(register_gated, owner="plugin 'gated'", dist="gated-attention==1.2")
    assert plugin.plugins_used(spec.model_dump(mode="json")) == {"scaled_gated_attention": "gated-attention==1.2"}
    run = tmp_path / "runs" / "gated" / "version_0"
    ckpt = load_checkpoint(run / "checkpoints" / "last.ckpt")
    ckpt["hyper_parameters"]["plugins"] = plugin.plugins_used(ckpt["hyper_parameters"]["experiment"])
    save_checkpoint(ckpt, run / "checkpoints" / "last.ckpt")
    with pytest.raises(UserError) as e:
        load_for_inference(run, registry())  # without the plugin
    assert str(e.value) == (
        f"{run / 'checkpoints' / 'last.ckpt'} was trained with 'scaled_gated_attention' of gated-attention==1.2, which is not "
        "installed here: pip install gated-attention==1.2"
    )
    model = build_model(spec.model)
    maps = attention_weights(model, [5, 6, 7], [1, 8, 9])
    weights, from_source = maps[("encoder", 0, "ScaledGatedAttention")]
    assert weights.shape == (1, H, 3, 3) and from_source is False
    assert torch.allclose(weights.sum(-1), torch.ones(1, H, 3))


def refusal(path: Path, capsys, with_: aiayn.Registry | None = None) -> str:
    """What `aiayn validate` prints to stderr for `path`, which it refuses with exit 2."""
    assert main(["validate", str(path), *TINY], registry=with_) == 2
    return capsys.readouterr().err


def test_a_registered_sublayer_gets_the_usual_messages(gated, write, capsys):
    path = experiment(write, f"{{type: scaled_gated_attention, heads: {H}, d_k: {DK}, d_v: {DV}}}")
    assert refusal(path, capsys, gated) == (
        f"aiayn validate: error: {path} is not a valid experiment (2 errors):\n"
        "  model.encoder.layer[0].h: required key is missing\n"
        "  model.encoder.layer[0].heads: unknown key; did you mean 'h'?\n"
    )
    path = experiment(write, f"{{type: scaled_gated_atention, h: {H}, d_k: {DK}, d_v: {DV}}}")
    assert refusal(path, capsys, gated) == (
        f"aiayn validate: error: {path} is not a valid experiment (1 error):\n"
        "  model.encoder.layer[0]: type 'scaled_gated_atention' is not one of self_attention, causal_self_attention, "
        "cross_attention, feed_forward, gated_feed_forward, sliding_window_attention, scaled_gated_attention; did you mean 'scaled_gated_attention'?\n"
    )
    path = write("decoder.yaml", f"extends: {DEMO}\nname: d\nmodel:\n  decoder:\n    layer: [{{type: scaled_gated_attention, h: {H}, "
                 f"d_k: {DK}, d_v: {DV}}}, {{type: cross_attention, h: {H}, d_k: {DK}, d_v: {DV}}}]\n")  # fmt: skip
    assert refusal(path, capsys, gated).endswith(
        "  model.decoder.layer[0].type: scaled_gated_attention in the decoder lets a position see later target tokens, "
        "which are not known when translating; use causal_self_attention\n"
    )


def test_the_schema_lists_a_registered_type(gated, capsys):
    assert main(["schema"], registry=gated) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["$defs"]["ScaledGatedAttentionSpec"]["properties"]["type"]["const"] == "scaled_gated_attention"
    assert schema["$defs"]["ScaledGatedAttentionSpec"]["additionalProperties"] is False


def test_a_registry_is_a_value_another_made_from_it_leaves_it_as_it_was(gated, write, capsys):
    assert "scaled_gated_attention" in gated.classes("sublayer") and "scaled_gated_attention" not in registry().classes(
        "sublayer"
    )
    assert "type 'scaled_gated_attention' is not one of self_attention, " in refusal(experiment(write), capsys, registry())
    kept = []
    gated.extended(kept.append)  # a builder kept past its function adds to nothing: the registry made is immutable
    with pytest.raises(aiayn.PluginError, match=r"^Registry.extended: registry.add\('ScaledGatedAttentionSpec'\) after its "):
        register_gated(kept[0])


def test_the_old_form_of_registering_says_what_to_write_instead(gated):
    """aiayn 0.x: `def register(): aiayn.register(...)`, which found its registry through module state."""
    instead = "def register\\(registry\\): registry.add\\(SpecClass, slot=..., build=...\\)"
    with pytest.raises(aiayn.PluginError, match=rf"^aiayn.register\(...\) is replaced by the registry .* write {instead}"):
        aiayn.register(ScaledGatedAttentionSpec, slot="sublayer", build=build_gated)

    def old_style() -> None:
        aiayn.register(ScaledGatedAttentionSpec, slot="sublayer", build=build_gated)

    with pytest.raises(aiayn.PluginError, match=rf"^Registry.extended: .*old_style\(\) takes no registry; .*: {instead}"):
        gated.extended(old_style)


def test_what_registering_refuses(gated):
    fine = dict(build=build_gated, flops=gated_flops, activations=lambda s, d: 0)
    with pytest.raises(
        aiayn.PluginError,
        match=r"^Registry.extended: type 'scaled_gated_attention' is already registered by "
        r"tests.builder.model.test_registry; give ScaledGatedAttentionSpec another type name$",
    ):
        gated.extended(lambda registry: registry.add(ScaledGatedAttentionSpec, slot="sublayer", **fine))

    class Again(aiayn.SublayerSpec):
        type: Literal["self_attention"] = "self_attention"

    with pytest.raises(
        aiayn.PluginError,
        match=r"^Registry.extended: type 'self_attention' is already registered by aiayn; give Again another type name$",
    ):
        gated.extended(lambda registry: registry.add(Again, slot="sublayer", **fine))

    class Untyped(aiayn.SublayerSpec):
        d: int = 1

    with pytest.raises(aiayn.PluginError, match=r'^Registry.extended: Untyped needs a field `type: Literal\["its-name"\]`'):
        gated.extended(lambda registry: registry.add(Untyped, slot="sublayer", **fine))
    with pytest.raises(aiayn.PluginError, match=r"^Registry.extended: Again must subclass aiayn.NormSpec to fill the norm slot$"):
        gated.extended(lambda registry: registry.add(Again, slot="norm", build=build_gated))
    with pytest.raises(
        aiayn.PluginError,
        match=r"^Registry.extended: slot 'sublayers' is not one of sublayer, norm, positional, stack_bias, score, text_step, tokenizer, utility, graph, sampling_filter, strategy$",
    ):
        gated.extended(lambda registry: registry.add(Again, slot="sublayers", **fine))
    with pytest.raises(aiayn.PluginError, match=r"^registry.add\('Again', slot='sublayer'\): give flops= and activations="):
        gated.extended(lambda registry: registry.add(Again, slot="sublayer", build=build_gated))
    # what is no function, or no slot's name, in the Python API (a TypeError from deep inside, before)
    for value in (5, "register", None):
        with pytest.raises(aiayn.PluginError) as e:
            gated.extended(value)
        assert (
            str(e.value)
            == f"Registry.extended: expected a function register(registry) that calls registry.add, got {described(value)}"
        )
    with pytest.raises(aiayn.PluginError, match=r"^Registry.extended: owner must be a str, got int 3$"):
        gated.extended(lambda registry: None, owner=3)
    with pytest.raises(
        aiayn.PluginError,
        match=r"^Registry.extended: slot \['norm'\] is not one of sublayer, norm, positional, stack_bias, score, text_step, tokenizer, utility, graph, sampling_filter, strategy$",
    ):
        gated.extended(lambda registry: registry.add(Again, slot=["norm"], **fine))
    for name in ("flops", "activations", "label"):
        with pytest.raises(aiayn.PluginError, match=rf"^registry.add\('Again'\): {name}= must be a function, got int 3$"):
            gated.extended(lambda registry: registry.add(Again, slot="sublayer", **{**fine, name: 3}))


def test_an_unknown_spec_or_a_block_of_the_wrong_kind_is_a_message(gated):
    class Unregistered(aiayn.SublayerSpec):
        type: Literal["unregistered"] = "unregistered"

    with pytest.raises(
        Exception, match=r"^no block is registered for Unregistered; register it with registry.add \(aiayn.RegistryBuilder\)$"
    ):
        build(Unregistered(), BuildContext(d_model=8, registry=gated))
    linear = registry().extended(
        lambda registry: registry.add(
            ScaledGatedAttentionSpec,
            slot="sublayer",
            build=lambda spec, ctx: nn.Linear(8, 8),
            flops=gated_flops,
            activations=lambda s, d: 0,
        )  # fmt: skip
    )
    with pytest.raises(
        aiayn.PluginError,
        match=r"^the builder of 'scaled_gated_attention' returned a Linear; a sub-layer's block "
        r"must subclass aiayn.Sublayer \(forward\(x, ctx\)\)$",
    ):
        build(ScaledGatedAttentionSpec(h=1, d_k=1, d_v=1), BuildContext(d_model=8, registry=linear))


def test_flops_come_from_the_registration(gated, write):
    spec = load_experiment(experiment(write), TINY, registry=gated).model
    paper = load_experiment(DEMO, TINY).model
    L = 64
    ours = gated_flops(spec.encoder.layer[0], D, L)
    theirs = 2 * (D * H * (2 * DK + DV) + H * DV * D) + 2 * H * (DK + DV) * L
    assert flops_per_token(spec, L) - flops_per_token(paper, L) == pytest.approx(ours - theirs)
    assert math.isclose(ours - theirs, 2 * D * D)


def example(path: Path, section: str) -> dict:
    """The namespace of the python block of `section` of a document, run as written."""
    text = path.read_text().split(section)[1].split("\n## ")[0]
    [code] = re.findall(r"```python\n(.*?)```", text, re.S)
    namespace = {"__name__": f"{path.stem}_example"}
    exec(compile(code, str(path), "exec"), namespace)
    return namespace


def test_the_manuals_norm_registers_and_is_counted(capsys):
    plugin = example(ROOT / "docs" / "experiments.md", "## Blocks of your own")
    scale_norm = registry().extended(plugin["register"])
    assert (
        main(
            ["show", str(EXPERIMENTS / "base.yaml"), "model.encoder.add_norm.norm.type=scale_norm", "--json"], registry=scale_norm
        )
        == 0
    )
    info = json.loads(capsys.readouterr().out)
    assert info["params"] == 63_082_496 - 6 * 2 * (2 * 512) + 6 * 2  # the encoder's LayerNorms become one scalar each
    assert {"block": "encoder.layer add & norm (ScaleNorm x2)", "params_each": 2, "count": 6, "params": 12} in info["blocks"]
    model = build_model(load_experiment(DEMO, ["model.encoder.add_norm.norm.type=scale_norm"], registry=scale_norm).model)
    x = torch.randn(2, 3, 128)
    norm = model.encoder.layers[0].sublayers[0].norm
    torch.testing.assert_close(norm(x), 128**0.5 * x / x.norm(dim=-1, keepdim=True))


def test_the_plugin_docs_gated_attention_registers_and_is_counted(write, capsys):
    plugin = example(ROOT / "docs" / "plugins.md", "## An example")
    gated_docs = registry().extended(plugin["register"])
    path = experiment(write, f"{{type: gated_attention, h: {H}, d_k: {DK}, d_v: {DV}}}")
    assert main(["show", str(path), *TINY, "--json"], registry=gated_docs) == 0
    info = json.loads(capsys.readouterr().out)
    mha = D * H * (2 * DK + DV) + H * (2 * DK + DV) + H * DV * D + D
    assert {
        "block": "encoder.layer[0] gated_attention",
        "params_each": mha + D * D + D,
        "count": 1,
        "params": mha + D * D + D,
    } in info["blocks"]
    assert info["params"] == sum(
        p.numel() for p in build_model(load_experiment(path, TINY, registry=gated_docs).model).parameters()
    )


@pytest.mark.parametrize(("entry", "what"), [("aiayn-graphs", "graph"), ("aiayn-strategies", "strategy")])
def test_an_install_made_before_an_entry_point_of_aiayns_is_told_to_install_again(monkeypatch, entry, what):
    """An editable install made before aiayn registered its graphs (pyproject.toml's aiayn-graphs) or
    its decoding strategies (aiayn-strategies) lacks that entry point until it is installed again:
    one line that says so, not a TypeError."""
    from aiayn.builder import plugins

    real = plugins.entry_points
    monkeypatch.setattr(plugins, "entry_points", lambda group: [ep for ep in real(group=group) if ep.name != entry])
    plugins.load_registry.cache_clear()
    try:
        with pytest.raises(aiayn.PluginError) as raised:
            plugins.load_registry("")
    finally:
        plugins.load_registry.cache_clear()
    assert str(raised.value) == (
        f"aiayn's {what} types are not registered: its entry point {entry} in group aiayn.blocks is missing, so this aiayn "
        "was installed before it; install it again (pip install -e . in its repository)"
    )

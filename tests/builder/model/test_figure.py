"""builder.model.figure and `aiayn show --figure`: the model drawn from its config. The figure's
text is read back from the SVG (matplotlib keeps text as <text> with svg.fonttype none) and the
PNG is opened with Pillow."""

import xml.etree.ElementTree as ET

import pytest
from PIL import Image

from aiayn.builder.cli import main
from aiayn.builder.model.figure import WIDTH_IN, layout, save
from tests.builder.model.test_registry import TINY, ScaledGatedAttentionSpec, build_gated, experiment, gated_flops
from tests.conftest import EXPERIMENTS, ROOT, load_experiment, registry


def svg_texts(path) -> list[str]:
    texts = [el for el in ET.parse(path).iter() if el.tag.endswith("text")]
    return ["".join(el.itertext()) for el in texts]


def sublayers_and_counts(texts: list[str], names: set[str]) -> list[str]:
    return [t for t in texts if t in names or t.endswith("×") or t.startswith("layer")]


PAPER = {"Multi-Head Attention", "Masked Multi-Head Attention", "Feed Forward"}


def test_the_papers_base_model(tmp_path, capsys):
    path = tmp_path / "base.svg"
    assert main(["show", str(EXPERIMENTS / "base.yaml"), "--figure", str(path)]) == 0
    assert capsys.readouterr().err == f"wrote {path} (8 x 9.82 in)\n"
    texts = svg_texts(path)
    drawn = layout(load_experiment(EXPERIMENTS / "base.yaml").model, title="base")
    assert texts == drawn.texts()
    assert texts[0] == "base: 63,082,496 parameters"  # aiayn show's total
    # bottom-up, each stack once with its N, in the paper's words: the encoder, then the decoder
    assert sublayers_and_counts(texts, PAPER) == ["Multi-Head Attention", "Feed Forward", "6×",
                                                  "Masked Multi-Head Attention", "Multi-Head Attention", "Feed Forward", "6×"]  # fmt: skip
    assert texts.count("Add & Norm") == 5 and "h=8, d_k=64, d_v=64" in texts and "d_ff=2048" in texts
    assert "1,050,624 params" in texts and "2,099,712 params" in texts and "18,944,000 params" in texts  # aiayn show's counts
    assert "Linear (tied to the embedding)" in texts and "shared: source = target = output" in texts
    assert texts[-1] == "one embedding matrix: source = target = output"
    encoder, decoder = drawn.columns
    kinds = [b.kind for b in encoder.boxes]
    assert kinds[:4] == ["io", "embedding", "positional", "sum"] and encoder.boxes[2].beside  # the positions added: ⊕
    assert encoder.boxes[2].lines[:2] == ["Positional", "Encoding"] and encoder.boxes[3].lines == ["⊕"]
    # post-norm: each residual leaves below its sub-layer and joins the Add & Norm above it
    assert [(encoder.boxes[a].lines[0], encoder.boxes[b].lines[0]) for a, b in encoder.residuals] == [
        ("Multi-Head Attention", "Add & Norm"), ("Feed Forward", "Add & Norm")]  # fmt: skip
    assert len(decoder.residuals) == 3


def test_pre_norm_draws_the_residual_around_the_norm_too(tmp_path):
    post = layout(load_experiment(EXPERIMENTS / "base.yaml").model)
    pre = layout(load_experiment(EXPERIMENTS / "base.yaml", ["model.encoder.add_norm.placement=pre"]).model)
    assert [(pre.columns[0].boxes[a].lines[0], pre.columns[0].boxes[b].lines[0]) for a, b in pre.columns[0].residuals] == [
        ("Norm", "Add"), ("Norm", "Add")]  # fmt: skip
    assert pre.columns[0].boxes[-1].lines[0] == "final Norm" and post.columns[0].boxes[-1].lines[0] == "Add & Norm"
    assert pre.columns[1].residuals == post.columns[1].residuals  # the decoder stays post-norm
    bare = layout(load_experiment(EXPERIMENTS / "base.yaml", ["model.positional=none"]).model)
    assert [b.kind for b in bare.columns[0].boxes[:3]] == ["io", "embedding", "sublayer"]  # no positions: nothing drawn for them
    save(pre, tmp_path / "pre.png")  # it draws


def test_a_heterogeneous_pre_norm_stack_draws_each_different_layer(write, tmp_path):
    yaml = write(
        "het.yaml",
        f"extends: {EXPERIMENTS / 'demo.yaml'}\nname: het\ndims: {{N: 4}}\nmodel:\n  encoder:\n"
        "    add_norm: {placement: pre, norm: {type: rms_norm}}\n"
        "    overrides:\n      2: [{type: self_attention, h: 2, d_k: 64, d_v: 64, kv_heads: 1}, {type: gated_feed_forward, d_ff: 341}]\n",
    )
    spec = load_experiment(yaml).model
    path = tmp_path / "het.svg"
    save(layout(spec, title="het"), path)
    texts = svg_texts(path)
    names = {*PAPER, "Gated Feed Forward (SwiGLU)"}
    assert sublayers_and_counts(texts, names) == [
        "Multi-Head Attention", "Feed Forward", "layers 0-1 (2×)",
        "Multi-Head Attention", "Gated Feed Forward (SwiGLU)", "layer 2",
        "Multi-Head Attention", "Feed Forward", "layer 3",
        "Masked Multi-Head Attention", "Multi-Head Attention", "Feed Forward", "4×",
    ]  # fmt: skip
    encoder = texts[texts.index("Encoder (N=4)") : texts.index("Decoder (N=4)")]
    first = encoder[encoder.index("⊕") + 1 :][:7]
    assert first == [
        "RMSNorm",
        "128 params",
        "Multi-Head Attention",
        "h=4, d_k=32, d_v=32",
        "66,048 params",
        "Add",
        "RMSNorm",
    ]  # pre-norm
    assert "h=2, d_k=64, d_v=64, 1 K/V heads" in texts and encoder[-2:] == ["final RMSNorm", "128 params"]
    assert "d_ff=341" in texts and "ffn=swiglu" not in texts  # the name says SwiGLU once


def test_a_plugin_block_is_labelled_by_its_registration(write, tmp_path):
    labelled = registry().extended(
        lambda registry: registry.add(
            ScaledGatedAttentionSpec,
            slot="sublayer",
            build=build_gated,
            flops=gated_flops,
            activations=lambda spec, d: 0,
            label=lambda spec: f"scaled gated attention ({spec.h} heads)",
        )  # fmt: skip
    )
    spec = load_experiment(experiment(write), TINY, registry=labelled).model
    path = tmp_path / "plugin.svg"
    save(layout(spec), path)
    texts = svg_texts(path)
    assert sublayers_and_counts(texts, {"scaled gated attention (2 heads)", "Feed Forward"})[:3] == [
        "scaled gated attention (2 heads)",
        "Feed Forward",
        "1×",
    ]
    assert "h=2, d_k=8, d_v=12" in texts  # what the spec says of itself (table3)


def test_the_png_opens_and_has_the_stated_size(tmp_path, capsys):
    path = tmp_path / "demo.png"
    assert main(["show", str(EXPERIMENTS / "demo.yaml"), "--figure", str(path), "--json"]) == 0
    out = capsys.readouterr()
    width, height = Image.open(path).size
    assert out.err == f"wrote {path} ({width} x {height} px)\n" and width == WIDTH_IN * 100 and height > 600
    assert out.out.startswith("{")  # the JSON alone on stdout


def test_a_figure_into_a_missing_folder_makes_it_as_translate_o_does(tmp_path, capsys):
    path = tmp_path / "figures" / "new" / "demo.svg"
    assert main(["show", str(EXPERIMENTS / "demo.yaml"), "--figure", str(path)]) == 0
    assert path.read_text().startswith("<?xml") and sorted(p.name for p in path.parent.iterdir()) == ["demo.svg"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("model.pdf", "--figure {p}: give a file name ending in .svg or .png (the suffix chooses the format)"),
        ("demo.yaml/model.svg", "--figure {p}: {parent} is a file, so nothing can be written under it"),
        ("figures.svg", "--figure {p} is a folder; give a file name ending in .svg or .png"),
    ],
)
def test_bad_figure_paths_are_messages(tmp_path, capsys, name, message):
    experiment_file = tmp_path / "demo.yaml"
    experiment_file.write_text(f"extends: {EXPERIMENTS / 'demo.yaml'}\n")
    before = experiment_file.read_bytes()
    path = tmp_path / name
    (tmp_path / "figures.svg").mkdir()
    assert main(["show", str(experiment_file), "--figure", str(path)]) == 2
    assert capsys.readouterr().err == f"aiayn show: error: {message.format(p=path, parent=path.parent)}\n"
    assert experiment_file.read_bytes() == before


def test_a_window_and_qk_norm_are_named_in_the_figure():
    spec = load_experiment(EXPERIMENTS / "demo.yaml", [
        "model.decoder.layer[0]={type: sliding_window_attention, h: 4, d_k: 32, d_v: 32, window: 8}", "model.encoder.layer[0].qk_norm=true",
    ]).model  # fmt: skip
    texts = layout(spec).texts()
    assert (
        "Masked Multi-Head Attention (window 8)" in texts and "h=4, d_k=32, d_v=32" in texts
    )  # the window said once, in the name
    assert "h=4, d_k=32, d_v=32, QK-norm" in texts


def test_a_trained_model_is_drawn_as_its_experiment_is(tmp_path, capsys):
    """`aiayn show RUN --figure F` draws the run's stored experiment (it once read the run
    directory as a YAML file), and refuses to write into the run."""
    run = ROOT / "tests" / "fixtures" / "release-0.1" / "version_0"
    drawn, stored = tmp_path / "run.svg", tmp_path / "stored.svg"
    assert main(["show", str(run), "--figure", str(drawn)]) == 0
    assert main(["show", str(run / "config.yaml"), "--figure", str(stored)]) == 0
    assert svg_texts(drawn) == svg_texts(stored)
    capsys.readouterr()
    assert main(["show", str(run), "--figure", str(run / "model.svg")]) == 2
    assert capsys.readouterr().err == (
        f"aiayn show: error: --figure {run / 'model.svg'} lies inside {run}, which this command reads; write outside it\n"
    )

"""aiayn export: what each target cannot express is refused with the field to change, OUT is
written whole or not at all, a missing package is a message; the d_model permutation that lets
Marian hold an interleaved model is exact."""

import importlib.util

import pytest
import torch

from aiayn.blocks import SinusoidalPositionalEncoding
from aiayn.builder.cli import main
from aiayn.builder.errors import UserError
from aiayn.builder.formats.limits import check_ctranslate2, check_marian
from aiayn.builder.model.weights import interleaved_to_concatenated
from tests.builder.decode.test_checkpoint import small_experiment
from tests.builder.export.runs import LEARNED, scrambled_run
from tests.conftest import validated_experiment

CT2, MARIAN = "cannot export to CTranslate2: ", "cannot export to Hugging Face Marian: "
FFN = {"type": "feed_forward", "d_ff": 32}
ATTENTION = {"type": "self_attention", "h": 2, "d_k": 8, "d_v": 8}


def model_spec(*overrides: str, edit=None):
    experiment = small_experiment(*overrides)
    if edit is not None:
        edit(experiment["model"])
    return validated_experiment(experiment).model


def heterogeneous(model: dict) -> None:
    model["encoder"]["num_layers"] = 2
    model["encoder"]["overrides"] = {1: [{**ATTENTION, "h": 1, "d_k": 16, "d_v": 16}, FFN]}


REFUSED = [
    (check_ctranslate2, model_spec(edit=heterogeneous), CT2 + "encoder.overrides makes a heterogeneous stack (layers [1] differ "
     "from encoder.layer), and CTranslate2 repeats one layer; export a model whose layers are all alike"),
    (check_marian, model_spec(edit=lambda m: m["encoder"].update(layer=[FFN, ATTENTION])), MARIAN + "encoder.layer is "
     "[feed_forward, self_attention]; Hugging Face Marian has only [self_attention, feed_forward]"),
    (check_ctranslate2, model_spec("dims.d_v=4"), CT2 + "encoder attention has d_k (8) != d_v (4); CTranslate2 has one head size"),
    (check_ctranslate2, model_spec("model.decoder.final_norm=true"), CT2 + "decoder.final_norm adds a LayerNorm after a post-norm "
     "stack, which CTranslate2 has only for pre-norm (add_norm.placement: pre)"),
    (check_ctranslate2, model_spec("model.decoder.add_norm.norm.eps=1e-5"), CT2 + "encoder.add_norm.norm.eps (1e-06) != "
     "decoder.add_norm.norm.eps (1e-05); CTranslate2 has one layer_norm_epsilon"),
    (check_marian, model_spec(edit=lambda m: m.update(positional=LEARNED)), MARIAN + "positional.type: learned; Marian's "
     "positions are fixed sinusoids, so train with positional.type: sinusoidal"),
    (check_marian, model_spec("model.embedding.shared_vocab=false", "model.embedding.share=target_output"), MARIAN +
     "embedding.shared_vocab: false; the exported tokenizers (a PreTrainedTokenizerFast, or MarianTokenizer's) have one "
     "vocabulary, so train with a shared vocabulary (or export --to ctranslate2)"),
    (check_marian, model_spec("model.decoder.add_norm.placement=pre"), MARIAN + "decoder.add_norm.placement: pre; Marian is "
     "post-norm only"),
    (check_marian, model_spec("model.encoder.final_norm=true"), MARIAN + "encoder.final_norm: true; Marian has no final LayerNorm"),
    (check_marian, model_spec("dims.h=4"), MARIAN + "encoder attention has d_k (8) != d_model / h (16 / 4); Marian's heads split "
     "d_model (export --to ctranslate2 takes any d_k)"),
    # the variants after 2017: CTranslate2 holds some, Marian none
    (check_ctranslate2, model_spec("model.positional=none", "model.encoder.position_bias={type: alibi}"), CT2 +
     "encoder.position_bias (alibi) has no counterpart in CTranslate2"),
    (check_ctranslate2, model_spec("model.positional=none", "model.decoder.position_bias={type: t5}"), CT2 +
     "decoder.position_bias (t5) has no counterpart in CTranslate2"),
    (check_ctranslate2, model_spec("model.decoder.layer.0.rotary={fraction: 1.0}"), CT2 + "decoder.layer[0].rotary beside "
     "positional.type: sinusoidal; CTranslate2 with rotary adds no absolute positions: train with positional: none"),
    (check_ctranslate2, model_spec("model.decoder.layer.0.kv_heads=1"), CT2 + "the attention sub-layers of decoder.layer differ in "
     "kv_heads [1, 2]; CTranslate2 has one num_heads_kv per stack"),
    (check_marian, model_spec("model.encoder.add_norm.norm.type=rms_norm"), MARIAN + "encoder.add_norm.norm is rms_norm; "
     "Hugging Face Marian has layer_norm only"),
    (check_marian, model_spec("model.decoder.layer.2.type=gated_feed_forward"), MARIAN + "decoder.layer is [causal_self_attention, "
     "cross_attention, gated_feed_forward]; Hugging Face Marian has only [causal_self_attention, cross_attention, feed_forward]"),
    (check_marian, model_spec("model.encoder.layer.0.kv_heads=1"), MARIAN + "encoder.layer[0].kv_heads (1); Marian has the paper's "
     "blocks only (export --to ctranslate2 takes it)"),
    (check_marian, model_spec("model.positional=none"), MARIAN + "positional.type: none has no counterpart in Hugging Face Marian"),
    # the variants of the composed attention: a window, QK-norm
    (check_ctranslate2, model_spec(edit=lambda m: m["decoder"]["layer"][0].update(type="sliding_window_attention", window=4)), CT2 +
     "decoder.layer[0] is sliding_window_attention, which has no counterpart in CTranslate2"),
    (check_ctranslate2, model_spec("model.encoder.layer.0.qk_norm=true"), CT2 + "encoder.layer[0].qk_norm (True); CTranslate2 holds "
     "ffn, kv_heads, rotary only"),
    (check_marian, model_spec("model.decoder.layer.1.qk_norm=true"), MARIAN + "decoder.layer[1].qk_norm (True); Marian has the "
     "paper's blocks only"),
]  # fmt: skip


@pytest.mark.parametrize(("check", "spec", "message"), REFUSED, ids=[m.split(": ", 2)[1][:40] for *_, m in REFUSED])
def test_what_a_target_cannot_express_is_refused_by_name(check, spec, message):
    with pytest.raises(UserError) as e:
        check(spec)
    assert str(e.value) == message


def test_a_switch_no_target_knows_is_refused_by_name_not_dropped(monkeypatch):
    """The targets hold an allow-list of switches: a departure a block reports that they do not
    know (a plugin's QK-norm on an attention exported as self_attention, say) is refused."""
    from aiayn.schemas.attention import SelfAttentionSpec

    monkeypatch.setattr(SelfAttentionSpec, "switches", property(lambda self: {"qk_norm": True}))
    spec = model_spec()
    for check, message in ((check_ctranslate2, CT2 + "encoder.layer[0].qk_norm (True); CTranslate2 holds ffn, kv_heads, rotary only"),
                           (check_marian, MARIAN + "encoder.layer[0].qk_norm (True); Marian has the paper's blocks only")):  # fmt: skip
        with pytest.raises(UserError) as e:
            check(spec)
        assert str(e.value) == message


def test_the_paper_model_is_accepted_by_both():
    spec = model_spec()
    check_ctranslate2(spec)
    check_marian(spec)


def test_permuting_d_model_turns_interleaved_sinusoids_into_concatenated():
    interleaved = SinusoidalPositionalEncoding(d_model=16, layout="interleaved")(40)
    concatenated = SinusoidalPositionalEncoding(d_model=16, layout="concatenated")(40)
    assert torch.equal(interleaved[:, interleaved_to_concatenated(16)], concatenated)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return scrambled_run(tmp_path_factory.mktemp("runs"))


def test_a_refusal_leaves_no_output(tmp_path, capsys):
    learned = scrambled_run(tmp_path / "runs", positional=LEARNED)
    assert main(["export", str(learned), "--to", "huggingface", str(tmp_path / "hf")]) == 2
    assert capsys.readouterr().err == f"aiayn export: error: {MARIAN}positional.type: learned; Marian's positions are fixed " \
        "sinusoids, so train with positional.type: sinusoidal\n"  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]


def test_out_is_written_whole_refused_when_full_and_replaced_with_force(run, tmp_path, capsys):
    pytest.importorskip("ctranslate2")
    out = tmp_path / "ct2"
    assert main(["export", str(run), "--to", "ctranslate2", str(out)]) == 0
    assert capsys.readouterr().out == f"exported {run / 'checkpoints' / 'last.ckpt'} (step 0) to {out} (CTranslate2)\n"
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.bin", "shared_vocabulary.json", "tokenizer.json"]
    assert (out / "tokenizer.json").read_text() == (run / "tokenizer.json").read_text()
    before = (out / "model.bin").read_bytes()
    assert main(["export", str(run), "--to", "ctranslate2", str(out), "--quantization", "int8"]) == 2
    assert (
        capsys.readouterr().err
        == f"aiayn export: error: {out} already holds files (config.json, model.bin, shared_vocabulary.json, ...); give a new or empty folder, or --force to replace it\n"
    )
    assert (out / "model.bin").read_bytes() == before
    assert main(["export", str(run), "--to", "ctranslate2", str(out), "--quantization", "int8", "--force"]) == 0
    assert len((out / "model.bin").read_bytes()) < len(before)  # int8 weights
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct2"]  # no staging folder left behind


def test_a_failure_while_writing_leaves_out_as_it_was(run, tmp_path, monkeypatch, capsys):
    module = pytest.importorskip("aiayn.builder.formats.to_ctranslate2", exc_type=ImportError)
    out = tmp_path / "ct2"
    out.mkdir()
    (out / "keep.txt").write_text("mine")

    def half_written(loaded, folder, **options):
        (folder / "model.bin").write_bytes(b"partial")
        raise UserError("disk full")

    monkeypatch.setattr(module, "write", half_written)
    assert main(["export", str(run), "--to", "ctranslate2", str(out), "--force"]) == 2
    assert capsys.readouterr().err == "aiayn export: error: disk full\n"
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct2"]


def test_a_missing_package_is_a_message(run, tmp_path, monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "transformers" else real(name, *a))
    assert main(["export", str(run), "--to", "huggingface", str(tmp_path / "hf")]) == 2
    assert capsys.readouterr().err == (
        "aiayn export: error: --to huggingface needs the transformers package, which is not installed: "
        'pip install -e ".[export]" (or pip install transformers)\n'
    )
    assert not (tmp_path / "hf").exists()


def test_quantization_is_for_ctranslate2_only(run, tmp_path, capsys):
    assert main(["export", str(run), "--to", "huggingface", str(tmp_path / "hf"), "--quantization", "int8"]) == 2
    assert capsys.readouterr().err == (
        "aiayn export: error: --quantization applies to --to ctranslate2 only; Hugging Face transformers gets the "
        "checkpoint's float32 weights\n"
    )


def test_out_that_is_a_file_is_refused(run, tmp_path, capsys):
    (tmp_path / "out").write_text("x")
    assert main(["export", str(run), "--to", "ctranslate2", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"aiayn export: error: {tmp_path / 'out'} is a file; give a folder to export into\n"


@pytest.mark.parametrize("where", ["run", "parent"])
def test_out_never_replaces_what_is_exported(run, where, capsys):
    out = run if where == "run" else run.parent
    before = sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in out.rglob("*"))
    assert main(["export", str(run), "--to", "ctranslate2", str(out), "--force"]) == 2
    said = "is one of the files this command reads" if where == "run" else f"holds {run}, which this command reads"
    assert capsys.readouterr().err == f"aiayn export: error: OUT {out} {said}; write to another path\n"
    assert sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in out.rglob("*")) == before

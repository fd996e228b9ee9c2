"""An exported model computes what aiayn computes: CTranslate2's token log-probabilities and
transformers' logits against aiayn's, and greedy and beam outputs token for token, on models whose
every parameter is random (so no weight can be mis-mapped unnoticed), in the paper's setting and in
the options each target takes (pre-norm, GELU, concatenated or learned positions, d_k != d_model/h,
no biases, an output bias, untied tables)."""

import json

import pytest
import torch

from aiayn.builder.data.demo import generate_demo
from aiayn.builder.decode.checkpoint import load_for_inference
from aiayn.builder.decode.load import load_run
from aiayn.builder.decode.translate import padded, with_source_eos
from aiayn.builder.export import export
from tests.builder.export.runs import LEARNED, aiayn_outputs, ct2_outputs, hf_outputs, scrambled_run

PRE_NORM = ("model.encoder.add_norm.placement=pre", "model.decoder.add_norm.placement=pre")
GELU = ("model.encoder.layer.1.activation=gelu", "model.decoder.layer.2.activation=gelu")
NO_BIAS = (
    "model.encoder.layer.0.bias=false", "model.encoder.layer.1.bias=false", "model.decoder.layer.0.bias=false",
    "model.decoder.layer.1.bias=false", "model.decoder.layer.2.bias=false",
)  # fmt: skip
RMS = ("model.encoder.add_norm.norm.type=rms_norm", "model.decoder.add_norm.norm.type=rms_norm")
KV = (("encoder", 0), ("decoder", 0), ("decoder", 1))  # every attention: CTranslate2 has one num_heads_kv a stack
ROTARY = ("model.encoder.layer.0.rotary={fraction: 0.5}", "model.decoder.layer.0.rotary={fraction: 0.5, base: 1000}")


def GATED(activation: str) -> tuple[str, ...]:  # noqa: N802
    return tuple(o for side, i in (("encoder", 1), ("decoder", 2)) for o in (
        f"model.{side}.layer.{i}.type=gated_feed_forward", f"model.{side}.layer.{i}.activation={activation}"))  # fmt: skip


CT2_CASES = {  # name: (overrides, positional section or None)
    "paper": ((), None),
    "pre-norm, gelu, concatenated, 4 heads of 8 in d_model 16, no biases, untied with an output bias": (
        (
            *PRE_NORM,
            *GELU,
            *NO_BIAS,
            "model.positional.layout=concatenated",
            "dims.h=4",
            "model.embedding.share=none",
            "model.embedding.output_bias=true",
        ),
        None,
    ),  # fmt: skip
    "learned positions, pre-norm encoder without final norm, post-norm decoder, unscaled embeddings": (
        ("model.encoder.add_norm.placement=pre", "model.encoder.final_norm=false", "model.embedding.scale=false"),
        LEARNED,
    ),
    "rmsnorm, swiglu": ((*RMS, *GATED("silu")), None),
    "pre-norm rmsnorm, geglu without biases": (
        (*PRE_NORM, *RMS, *GATED("gelu"), "model.encoder.layer.1.bias=false", "model.decoder.layer.2.bias=false"),
        None,
    ),
    "multi-query attention (kv_heads 1 of h 2), relu": (tuple(f"model.{s}.layer.{i}.kv_heads=1" for s, i in KV), None),
    "reglu": (GATED("relu"), None),
    "rotary on half of each head, no absolute positions": (("model.positional=none", *ROTARY), None),
    "rotary on the encoder only, grouped kv": (
        ("model.positional=none", "model.encoder.layer.0.rotary={fraction: 1.0, base: 100}", "model.encoder.layer.0.kv_heads=1"),
        None,
    ),
    "sources ending with </s> (fairseq's)": (("model.source_eos=true",), None),
}
MARIAN_CASES = {
    "paper (interleaved sinusoids, permuted)": (),
    "concatenated, gelu, no biases, target tables tied with an output bias": (
        *GELU,
        *NO_BIAS,
        "model.positional.layout=concatenated",
        "model.embedding.share=target_output",
        "model.embedding.output_bias=true",
    ),  # fmt: skip
    "sources ending with </s> (MarianTokenizer's)": ("model.source_eos=true",),
}
MAX_LEN_B = 5


def sources(loaded, n: int = 12) -> list[list[int]]:
    """Demo sentences cut to 4..15 tokens: a random model writes to the length limit, so short
    inputs keep the searches short."""
    ids = loaded.src_tokenizer.encode_batch(generate_demo(n, 1, 1, 99)["train"][0])
    return [x[: 4 + i] for i, x in enumerate(ids)]


def references(loaded, n: int = 4) -> list[list[int]]:
    return loaded.tgt_tokenizer.encode_batch(generate_demo(n, 1, 1, 99)["train"][1])


def aiayn_log_probs(loaded, src: list[int], tgt: list[int]) -> torch.Tensor:
    """log P(y_t | y_<t, x) of each token of tgt + </s>."""
    with torch.no_grad():
        logits = loaded.model(padded(with_source_eos(loaded.model, [src]), 0), padded([[1, *tgt]], 0))[0]  # (T, V)
    return logits.log_softmax(-1).gather(1, torch.tensor([*tgt, 2])[:, None])[:, 0]


@pytest.mark.parametrize(("overrides", "positional"), CT2_CASES.values(), ids=CT2_CASES.keys())
def test_ctranslate2_scores_and_outputs_are_aiayns(tmp_path, overrides, positional):
    ctranslate2 = pytest.importorskip("ctranslate2")
    run = scrambled_run(tmp_path / "runs", *overrides, positional=positional)
    export(run, "ctranslate2", tmp_path / "ct2")
    loaded = load_for_inference(run)
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu", intra_threads=1)
    tok = loaded.src_tokenizer
    as_tokens = lambda ids: [tok.hf.id_to_token(i) for i in ids]  # noqa: E731
    for src, tgt in zip(sources(loaded), references(loaded)):
        [scored] = translator.score_batch([as_tokens(src)], [as_tokens(tgt)])
        torch.testing.assert_close(torch.tensor(scored.log_probs), aiayn_log_probs(loaded, src, tgt), atol=2e-4, rtol=1e-4)
    ids = sources(loaded)
    for beam in (1, 4):
        ours = aiayn_outputs(loaded, ids, beam=beam, alpha=1.0, max_len_b=MAX_LEN_B)
        theirs = ct2_outputs(translator, tok, ids, beam=beam, alpha=1.0, max_len_b=MAX_LEN_B + int(loaded.spec.model.source_eos))
        assert theirs == ours, f"beam {beam}"  # CTranslate2 appends the </s> (add_source_eos) and bounds by the tokens given


@pytest.mark.parametrize("overrides", MARIAN_CASES.values(), ids=MARIAN_CASES.keys())
def test_marian_logits_and_outputs_are_aiayns(tmp_path, overrides):
    transformers = pytest.importorskip("transformers")
    run = scrambled_run(tmp_path / "runs", *overrides)
    export(run, "huggingface", tmp_path / "hf")
    loaded = load_for_inference(run)
    hf = transformers.MarianMTModel.from_pretrained(tmp_path / "hf").eval()
    x = padded(with_source_eos(loaded.model, sources(loaded, 4)), 0)
    y = padded([[1, *t] for t in references(loaded)], 0)
    with torch.no_grad():
        ours = loaded.model(x, y)
        theirs = hf(input_ids=x, attention_mask=x.ne(0), decoder_input_ids=y).logits
    real = y.ne(0)
    # Marian's LayerNorm eps is 1e-5, aiayn's 1e-6: close, not bit for bit
    torch.testing.assert_close(theirs[real], ours[real], atol=2e-3, rtol=1e-4)
    ids = sources(loaded)
    for beam in (1, 4):
        ours = aiayn_outputs(loaded, ids, beam=beam, alpha=0.6, max_len_b=MAX_LEN_B)
        assert hf_outputs(hf, with_source_eos(loaded.model, ids), beam=beam, alpha=0.6, max_len_b=MAX_LEN_B) == ours, (
            f"beam {beam}"
        )


@pytest.mark.parametrize("source_eos", [False, True], ids=["no specials", "source_eos"])
def test_marian_tokenizer_is_aiayns(tmp_path, source_eos):
    transformers = pytest.importorskip("transformers")
    run = scrambled_run(tmp_path / "runs", f"model.source_eos={str(source_eos).lower()}")
    export(run, "huggingface", tmp_path / "hf")
    loaded = load_for_inference(run)
    hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    en, de = generate_demo(6, 1, 1, 5)["train"]
    ours = [[*ids, 2] if source_eos else ids for ids in loaded.src_tokenizer.encode_batch(en)]
    assert [hf_tok(s)["input_ids"] for s in en] == ours  # no specials on the source, or </s> at its end
    ids = loaded.tgt_tokenizer.encode_batch(de)
    assert [hf_tok.decode([1, *t, 2, 0], skip_special_tokens=True) for t in ids] == loaded.tgt_tokenizer.decode_batch(ids)


@pytest.mark.parametrize("beam", [1, 4])
def test_the_runs_decode_settings_travel_to_generate(tmp_path, beam):
    """A greedy run exports too (transformers refuses beam settings with one beam), and generate()
    with nothing but the exported generation_config.json decodes as the run does."""
    transformers = pytest.importorskip("transformers")
    run = scrambled_run(tmp_path / "runs", f"decode.beam={beam}", "decode.length_penalty=fairseq", "decode.alpha=1.0")
    export(run, "huggingface", tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "generation_config.json").read_text())
    assert config["num_beams"] == beam
    assert (config.get("length_penalty"), config.get("early_stopping")) == ((1.0, True) if beam > 1 else (None, None))
    loaded = load_for_inference(run)
    hf = transformers.MarianMTModel.from_pretrained(tmp_path / "hf").eval()
    ids = sources(loaded)
    ours = aiayn_outputs(loaded, ids, beam=beam, alpha=1.0, max_len_b=MAX_LEN_B)
    theirs = []
    for src in with_source_eos(loaded.model, ids):
        out = hf.generate(input_ids=torch.tensor([src]), max_length=1 + len(src) + MAX_LEN_B)[0].tolist()[1:]
        theirs.append(out[: out.index(2)] if 2 in out else out)
    assert theirs == ours


def test_generate_settings_travel_to_the_folder_and_back(tmp_path):
    """A run that decodes with transformers' settings (early_stopping false, </s> forced at a
    fixed limit, <unk> suppressed, renormalised scores) exports them: generate() with nothing but
    the folder's generation_config.json gives the run's 4-best lists, scores included, and the
    folder read back decodes with the run's settings."""
    transformers = pytest.importorskip("transformers")
    settings = ("decode.beam=4", "decode.length_penalty=fairseq", "decode.alpha=1.0", "decode.early_stopping=false",
                "decode.forced_eos=true", "decode.max_len_a=0", "decode.max_len_b=7", "decode.suppress=[<unk>]",
                "decode.renormalize=true")  # fmt: skip
    run = scrambled_run(tmp_path / "runs", *settings)
    export(run, "huggingface", tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "generation_config.json").read_text())
    assert {k: config.get(k) for k in ("early_stopping", "forced_eos_token_id", "max_length", "suppress_tokens", "renormalize_logits")} == {
        "early_stopping": False, "forced_eos_token_id": 2, "max_length": 8, "suppress_tokens": [0, 3], "renormalize_logits": True,
    }  # fmt: skip
    loaded = load_for_inference(run)
    translator = load_run(run)
    hf = transformers.MarianMTModel.from_pretrained(tmp_path / "hf").eval()
    texts = generate_demo(12, 1, 1, 99)["train"][0]
    for text, hyps in zip(texts, translator.translate(texts, n_best=4, with_scores=True)):
        [src] = with_source_eos(loaded.model, [loaded.src_tokenizer.encode(text)])
        out = hf.generate(input_ids=torch.tensor([src]), num_return_sequences=4, output_scores=True, return_dict_in_generate=True)
        for h, seq, score in zip(hyps, out.sequences.tolist(), out.sequences_scores.tolist()):
            assert seq[1 : len(h.ids) + 2] == [*h.ids, 2] and h.score == pytest.approx(score, abs=1e-4), text
    fields = {
        "beam",
        "alpha",
        "length_penalty",
        "early_stopping",
        "forced_eos",
        "max_len_a",
        "max_len_b",
        "suppress",
        "renormalize",
    }
    back = load_for_inference(tmp_path / "hf").spec.decode
    assert back.model_dump(include=fields) == loaded.spec.decode.model_dump(include=fields)

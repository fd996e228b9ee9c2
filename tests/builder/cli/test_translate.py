"""aiayn translate / evaluate / average through builder.cli.main on a tiny checkpoint made here."""

import io
import json
import math
import sys

import pytest
import sacrebleu
import torch

from aiayn.builder.cli import main
from aiayn.builder.data.demo import generate_demo
from aiayn.builder.decode.checkpoint import load_for_inference
from aiayn.builder.decode.metrics import literature_bleu, tokenized_bleu
from aiayn.builder.decode.translate import padded as source_tensor
from aiayn.builder.decode.translate import translate_texts
from aiayn.schemas.decode import DecodeSpec
from tests.builder.decode.greedy import greedy_reference
from tests.builder.decode.test_checkpoint import SMALL, make_run

# different lengths, so that batching by length reorders them; blank lines in between
LINES = [
    "she sold eight apples",
    "",
    "we counted two pictures",
    "he said that the children sold seven flowers yesterday",
    "   ",
    "the dog",
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("runs"), seed=7)


@pytest.fixture(scope="module")
def loaded(run):
    return load_for_inference(run)


@pytest.fixture
def stdin(monkeypatch):
    def feed(text: str) -> None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8")), encoding="utf-8"))

    return feed


def one_by_one(loaded, lines, decode: DecodeSpec) -> list[str]:
    translate = lambda line: translate_texts(loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer, [line], decode)[0]
    return [translate(line) if line.strip() else "" for line in lines]


def test_translate_keeps_input_order_and_blank_lines(run, loaded, stdin, capsys):
    stdin("".join(line + "\n" for line in LINES))
    assert main(["translate", str(run), "--max-tokens", "12"]) == 0  # several batches
    out = capsys.readouterr().out.split("\n")
    assert out[-1] == "" and len(out) - 1 == len(LINES)
    assert [out[1], out[4]] == ["", ""]
    assert out[:-1] == one_by_one(loaded, LINES, loaded.spec.decode)
    assert all(out[i] for i in (0, 2, 3, 5))  # a random model still says something


def test_translate_files_and_overrides(run, loaded, tmp_path, capsys):
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("\n".join(LINES) + "\n")
    args = ["translate", str(run), "--input", str(src), "--output", str(out), "--beam", "1", "--max-len-b", "3"]
    assert main(args) == 0
    assert capsys.readouterr().out == ""
    hyps = out.read_text().split("\n")[:-1]
    # beam 1 is greedy search: the plain greedy loop's output
    tok = loaded.src_tokenizer
    ids = [tok.encode(line) for line in LINES if line.strip()]
    expected = [greedy_reference(loaded.model, source_tensor([x], 0), bos_id=1, eos_id=2, max_len_b=3)[0] for x in ids]
    assert [h for line, h in zip(LINES, hyps) if line.strip()] == tok.decode_batch(expected)
    decode = DecodeSpec(beam=2, alpha=1.0, length_penalty="fairseq", max_len_b=4)
    args = [
        "translate",
        str(run),
        "-i",
        str(src),
        "--beam",
        "2",
        "--alpha",
        "1",
        "--length-penalty",
        "fairseq",
        "--max-len-b",
        "4",
    ]
    assert main(args) == 0
    assert capsys.readouterr().out.split("\n")[:-1] == one_by_one(loaded, LINES, decode)


def test_translate_messages(run, tmp_path, stdin, capsys):
    stdin("hello\n")
    assert main(["translate", str(run), "--beam", "0"]) == 2
    assert capsys.readouterr().err == "aiayn translate: error: --beam (0): input should be greater than 0\n"
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"not a checkpoint")
    stdin("hello\n")
    assert main(["translate", str(bad)]) == 2
    assert capsys.readouterr().err == (
        f"aiayn translate: error: {bad} is not an aiayn checkpoint: torch.load cannot read it; "
        "give a .ckpt written by `aiayn train` or `aiayn average`\n"
    )
    stdin("hello\n")
    assert main(["translate", str(run), "--device", "tpu0"]) == 2
    assert capsys.readouterr().err == (
        "aiayn translate: error: --device 'tpu0' is not a torch device; use e.g. cpu, cuda or cuda:1\n"
    )
    assert main(["translate", str(run), "--input", str(tmp_path / "missing.txt")]) == 2
    assert capsys.readouterr().err == f"aiayn translate: error: --input {tmp_path / 'missing.txt'}: no such file\n"
    monkey = io.TextIOWrapper(io.BytesIO(b"ok\n\xff\n"), encoding="utf-8")
    sys_stdin, sys.stdin = sys.stdin, monkey
    try:
        assert main(["translate", str(run)]) == 2
    finally:
        sys.stdin = sys_stdin
    assert capsys.readouterr().err == (
        "aiayn translate: error: stdin, line 2: invalid UTF-8 (byte 0xff); the input must be UTF-8 text\n"
    )


def reference_perplexity(loaded, sources, refs) -> float:
    """exp(mean NLL per target token, EOS included), one pair at a time, blank sources left out."""
    nll, count = 0.0, 0
    for s, r in zip(sources, refs):
        if not s.strip():
            continue
        tgt = loaded.tgt_tokenizer.encode(r) + [2]
        logits = loaded.model(torch.tensor([loaded.src_tokenizer.encode(s)]), torch.tensor([[1] + tgt[:-1]]))
        log_probs = logits.double().log_softmax(-1)[0]
        nll -= sum(log_probs[t, token].item() for t, token in enumerate(tgt))
        count += len(tgt)
    return math.exp(nll / count)


def test_evaluate_json_on_given_files(run, loaded, tmp_path, capsys):
    sources = [line for line in LINES if line.strip()] + [""]
    hyps = one_by_one(loaded, sources, loaded.spec.decode)
    src, ref = tmp_path / "src.en", tmp_path / "ref.de"
    src.write_text("\n".join(sources) + "\n")
    ref.write_text("\n".join(hyps) + "\n")  # the model's own translations: chrF is 100
    assert main(["evaluate", str(run), "--src", str(src), "--ref", str(ref), "--json", "--tok-bleu"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert {"bleu", "chrf", "ppl", "signature", "n_sentences", "checkpoint", "tok_bleu"} <= result.keys()
    assert result["chrf"] == 100.0
    # BLEU: a random model writes one-word lines, which have no 4-grams
    assert result["bleu"] == round(sacrebleu.corpus_bleu(hyps, [hyps]).score, 2) == 0.0
    assert result["n_sentences"] == 5
    assert result["checkpoint"] == str(run / "checkpoints" / "last.ckpt")
    assert result["signature"] == f"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{sacrebleu.__version__}"
    assert result["ppl"] == pytest.approx(reference_perplexity(loaded, sources, hyps), rel=1e-5)

    other = ["the children sold seven apples", "we counted", "x", "he said that", ""]
    ref.write_text("\n".join(other) + "\n")
    assert main(["evaluate", str(run), "--src", str(src), "--ref", str(ref), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["bleu"] == round(sacrebleu.corpus_bleu(hyps, [other]).score, 2)
    assert result["chrf"] == round(sacrebleu.corpus_chrf(hyps, [other]).score, 2)
    assert result["ppl"] == pytest.approx(reference_perplexity(loaded, sources, other), rel=1e-5)
    assert "tok_bleu" not in result


def test_evaluate_defaults_to_the_demo_test_split(run, capsys):
    assert main(["evaluate", str(run)]) == 0
    text = capsys.readouterr().out
    assert "data        the demo corpus's test split, seed 1234 (7 sentences)" in text
    assert "BLEU " in text and "chrF " in text and "PPL " in text and "nrefs:1|case:mixed" in text
    assert "tok. BLEU" not in text
    n_test = int(next(o for o in SMALL if o.startswith("data.n_test=")).split("=")[1])
    assert n_test == len(generate_demo(200, 5, 7, 1234)["test"][0]) == 7


def test_evaluate_messages(run, tmp_path, capsys):
    src, ref = tmp_path / "a.en", tmp_path / "b.de"
    src.write_text("one\ntwo\n")
    ref.write_text("eins\n")
    assert main(["evaluate", str(run), "--src", str(src)]) == 2
    assert capsys.readouterr().err == (
        "aiayn evaluate: error: --src needs --ref: give both, or neither to evaluate a split of the experiment\n"
    )
    assert main(["evaluate", str(run), "--ref", str(ref)]) == 2  # a language model's text alone; a translation needs its sources
    assert capsys.readouterr().err == (
        "aiayn evaluate: error: --ref needs --src: give both, or neither to evaluate a split of the experiment\n"
    )
    assert main(["evaluate", str(run), "--src", str(src), "--ref", str(ref)]) == 2
    assert capsys.readouterr().err == (
        f"aiayn evaluate: error: parallel corpus is misaligned: {src} has 2 lines but {ref} has 1; "
        "line N of one file must translate line N of the other\n"
    )
    assert main(["evaluate", str(tmp_path / "nothing")]) == 2
    assert capsys.readouterr().err == (
        f"aiayn evaluate: error: {tmp_path / 'nothing'} does not exist: give a run directory "
        "(runs/<name>/version_<n>), a .ckpt file or a Hugging Face folder (Marian, GPT-2, Llama)\n"
    )


def test_slim_copy_translates_like_the_original(run, tmp_path, stdin, capsys):
    slim = tmp_path / "slim.ckpt"
    assert main(["average", str(run / "checkpoints" / "last.ckpt"), "-o", str(slim)]) == 0
    capsys.readouterr()
    outputs = []
    for source in (run, slim):
        stdin("".join(line + "\n" for line in LINES))
        assert main(["translate", str(source)]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert slim.stat().st_size < (run / "checkpoints" / "last.ckpt").stat().st_size


def test_tokenized_bleu_splits_compounds():
    split = tokenized_bleu(["a well-known man"], ["a well known man"])["tok_bleu"]
    plain = tokenized_bleu(["a well known man"], ["a well known man"])["tok_bleu"]
    expected = sacrebleu.corpus_bleu(["a well ##AT##-##AT## known man"], [["a well known man"]], tokenize="intl").score
    assert plain == pytest.approx(100.0)
    assert split == pytest.approx(expected, abs=0.005) and expected < 60.0


def test_literature_bleu_is_lowercased_bleu_of_moses_tokens():
    hyp, ref = 'Ein Mann, der "Hallo" sagt.', 'ein mann , der " hallo " sagt .'
    result = literature_bleu([hyp], [ref], "de")
    assert result == {
        "lc_bleu": 100.0,  # punctuation split off by Moses and case ignored: the same tokens
        "lc_bleu_signature": f"nrefs:1|case:lc|eff:no|tok:none|smooth:exp|version:{sacrebleu.__version__}|pre:sacremoses-de",
    }
    cased = sacrebleu.corpus_bleu([hyp], [[ref]]).score  # the detokenized, cased score differs
    assert cased < 50.0
    expected = sacrebleu.corpus_bleu(["ein mann , der sagt ."], [[ref]], tokenize="none").score
    assert literature_bleu(["Ein Mann, der sagt."], [ref], "de")["lc_bleu"] == pytest.approx(expected, abs=0.005)


def test_literature_bleu_does_not_warn_that_its_tokens_are_not_detokenized(caplog):
    lines = [f"Ein Mann sagt {i} Dinge." for i in range(120)]  # Moses makes each end in " ."
    with caplog.at_level("WARNING", logger="sacrebleu"):
        assert literature_bleu(lines, lines, "de")["lc_bleu"] == 100.0
    assert caplog.records == []


def test_a_line_too_long_for_learned_positions_is_named(tmp_path, stdin, capsys):
    run = make_run(tmp_path, overrides=("model.positional.type=learned", "model.positional.max_len=65"))
    line = "seven " * 80
    n = len(load_for_inference(run).src_tokenizer.encode(line))
    assert n > 65
    stdin(f"one\n{line}\n")
    assert main(["translate", str(run)]) == 2
    assert capsys.readouterr().err == (
        f"aiayn translate: error: input line 2 has {n} tokens but the model's learned positions cover only 65; "
        "shorten or split that line\n"
    )
    stdin("one\nthe children counted seven pictures\n")
    assert main(["translate", str(run), "--max-len-b", "100"]) == 0  # outputs stop at position 65
    assert [len(x) > 0 for x in capsys.readouterr().out.split("\n")] == [True, True, False]

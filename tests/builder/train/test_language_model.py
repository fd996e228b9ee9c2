"""A language model end to end through the CLI: `aiayn train` of the lm demo (tiny) writes loss,
PPL and bits per byte to results.json and TensorBoard, `aiayn generate` continues prompts as the
Python API does (the same seed, the same text), and what cannot be done is a message."""

import io
import json
import math
import sys

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from aiayn.builder.data.contiguous import BlockDataset, text_bytes
from aiayn.builder.data.demo import generate_demo
from aiayn.builder.data.ragged import RaggedIds
from aiayn.builder.decode.load import load_run
from tests.builder.cli.test_bad_inputs import cli
from tests.conftest import EXPERIMENTS

LM = EXPERIMENTS / "lm" / "demo.yaml"
TINY = ["dims.d_model=32", "dims.d_ff=64", "dims.h=2", "dims.d_k=16", "dims.d_v=16", "dims.N=1", "dims.vocab_size=400",
        "data.n_train=600", "data.n_valid=20", "data.n_test=20", "train.tokens_per_step=1000", "trainer.val_check_interval=4",
        "trainer.log_every_n_steps=1", "trainer.enable_progress_bar=false"]  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm")
    code, out, err = cli("train", LM, *TINY, "trainer.max_steps=8", f"data.cache_dir={root / 'cache'}", "--runs", root / "runs")
    assert code == 0, err
    assert out.splitlines()[-1].startswith("finished in ") and " bits per byte on valid (20 sentences); " in out.splitlines()[-1]
    return root / "runs" / "lm-demo" / "version_0"


def test_results_and_tensorboard_hold_loss_ppl_and_bits_per_byte(run):
    results = json.loads((run / "results.json").read_text())
    assert results["bleu"] is None and results["sacrebleu_signature"] is None and results["paper"]["graph"] == "decoder-only"
    assert results["ppl"] > 1 and results["bpb"] > 0 and results["n_sentences"] == 20
    events = EventAccumulator(str(run)).Reload()
    bpb = [e.value for e in events.Scalars("bpb/valid")]
    assert len(bpb) == 2 and bpb[-1] == pytest.approx(results["bpb"], rel=1e-4)
    ppl = events.Scalars("PPL/valid")[-1].value
    assert ppl == pytest.approx(results["ppl"], rel=1e-4)
    [*_, last] = events.Tensors("valid/samples/text_summary")
    table = last.tensor_proto.string_val[0].decode()
    english = generate_demo(600, 20, 20, 1234)["valid"][0][0]  # the side the model reads: its prompts are English
    assert f"| {' '.join(english.split()[:3])} |" in table, table
    maps = [t for t in events.Tags()["images"] if t.startswith("valid/attention/")]
    assert maps == ["valid/attention/decoder.layer0.causal_self"]  # of `<s>` and the first validation sentence
    (figure,) = events.Images(maps[0])  # the first validation's, of the next five
    assert figure.step == 4


def test_generate_prints_each_prompt_with_its_continuation_as_the_python_api_does(run, monkeypatch):
    code, out, err = cli("generate", run, "--prompt", "she bought", "--prompt", "two", "--seed", "7", "-n", "12")
    assert code == 0, err
    model = load_run(run)
    assert out.splitlines() == model.generate(["she bought", "two"], seed=7, max_new_tokens=12)
    assert all(line.startswith(p) for line, p in zip(out.splitlines(), ["she bought", "two"]))
    assert model.generate("two", seed=7, max_new_tokens=12) == model.generate(["two"], seed=7, max_new_tokens=12)
    assert cli("generate", run, "--prompt", "two", "--seed", "7", "-n", "12")[1].splitlines() == out.splitlines()[1:]  # alone
    greedy = cli("generate", run, "--prompt", "two", "--greedy")[1]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"two\n"), encoding="utf-8"))
    assert cli("generate", run, "--greedy")[1] == greedy  # stdin, one prompt a line


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--prompt", ""], "prompt 1 is empty; give the text to continue (the model starts it with <s> itself)"),
        (["--prompt", "a", "--greedy", "--top-p", "0.9"], "--greedy takes the most probable token; --top-p shapes sampling: give one or the other"),
        (["--prompt", "a", "--temperature", "0"], "--temperature (0.0) must be > 0; for the most probable token take greedy"),
        (["--prompt", "a", "-n", "0"], "--max-new-tokens (-n): give 1 or more tokens to add, got 0"),  # the flag, not max_new_tokens
    ],
)  # fmt: skip
def test_what_generate_cannot_do_is_a_message(run, argv, message):
    assert cli("generate", run, *argv)[::2] == (2, f"aiayn generate: error: {message}\n")


def test_bits_per_byte_read_every_token_once_in_blocks():
    text = RaggedIds.from_lists([[5, 6, 7], [], [8]])
    blocks = BlockDataset(text, 2, bos_id=1, eos_id=2)
    assert blocks.stream.tolist() == [1, 5, 6, 7, 2, 2, 8, 2]
    assert [b.tgt.tolist() for b in blocks[[0, 1, 2, 3]]] == [[1, 5, 6], [6, 7, 2], [2, 2, 8], [8, 2]]
    assert blocks.predicted == 7 == sum(blocks.tgt_lengths)
    assert text_bytes(["abc", "", "é"]) == 4 + 1 + 3
    assert math.isclose(7 / text_bytes(["abc", "", "é"]), 0.875)


def test_evaluate_scores_a_split_as_training_did_and_translate_refuses(run):
    code, out, err = cli("evaluate", run, "--split", "valid", "--json")
    assert code == 0, err
    scores, results = json.loads(out), json.loads((run / "results.json").read_text())
    assert (scores["ppl"], scores["bpb"], scores["n_sentences"]) == pytest.approx((results["ppl"], results["bpb"], 20))
    text = run.parent.parent / "valid.en"  # the same sentences as a file, a blank line among them: skipped, its byte too
    text.write_text("\n".join(generate_demo(600, 20, 20, 1234)["valid"][0][:10]) + "\n\n")
    code, out, err = cli("evaluate", run, "--ref", text, "--json")
    assert code == 0 and json.loads(out)["n_sentences"] == 10, err
    for lines, message in (
        ("", f"{text} is empty: it holds no sentences to score"),
        ("\n \n", f"{text}: all 2 lines are blank; it holds no sentences"),
    ):
        text.write_text(lines)
        assert cli("evaluate", run, "--ref", text)[::2] == (2, f"aiayn evaluate: error: {message}\n")
    assert cli("translate", run)[::2] == (
        2, f"aiayn translate: error: {run} is a language model of en text, which translates nothing: aiayn generate "
        "continues its text, aiayn evaluate gives its perplexity and bits per byte\n",
    )  # fmt: skip


def test_aiayn_results_shows_bits_per_byte_and_no_bleu(run, tmp_path):
    code, out, err = cli("results", run.parent.parent)
    head = [c.strip() for c in out.splitlines()[0].strip("|").split("|")]
    assert code == 0 and "bits/byte" in head and "BLEU" not in head and "graph" in head, err


def test_a_monolingual_folder_is_read_with_its_own_languages_rules(tmp_path):
    """A language model of `{split}.en` files alone (no .de beside them) trains, and its text goes
    through the English pipeline: training's validation and `aiayn evaluate` count the same tokens
    (English Moses splits "isn't" as "isn &apos;t", German as "isn &apos; t")."""
    english = generate_demo(600, 20, 20, 1234)
    corpus = tmp_path / "mono"
    corpus.mkdir()
    for split in ("train", "valid", "test"):
        lines = [f"{s} isn't it's" for s in english[split][0]]
        (corpus / f"{split}.en").write_text("".join(line + "\n" for line in lines))
    sizes = [o for o in TINY if not o.startswith("data.")]  # the demo corpus's sizes: no files' setting
    argv = ["train", LM, *sizes, "trainer.max_steps=2", "data.type=files", f"data.dir={corpus}", "data.pipeline=[moses_tokenize]",
            f"data.cache_dir={tmp_path / 'cache'}", "--runs", tmp_path / "runs"]  # fmt: skip
    code, out, err = cli(*argv)
    assert code == 0, err
    run = tmp_path / "runs" / "lm-demo" / "version_0"
    results = json.loads((run / "results.json").read_text())
    code, out, err = cli("evaluate", run, "--split", "valid", "--json")
    assert code == 0, err
    scores = json.loads(out)
    assert (scores["n_tokens"], scores["ppl"]) == (results["n_tokens"], pytest.approx(results["ppl"], rel=1e-6))
    assert scores["data"] == f"{corpus / 'valid.en'}, through data.pipeline"
    processed = [p.read_text() for p in (tmp_path / "cache" / "text").glob("valid.en-*")]
    assert len(processed) == 1 and "isn &apos;t it &apos;s\n" in processed[0]  # English rules only: one processed file


def test_the_last_line_says_what_blocks_and_which_model_were_scored(tmp_path):
    """A run in blocks is scored on blocks of its validation sentences, and an averaged run with the
    mean of its checkpoints: the last line and results.json say both."""
    argv = ["train", LM, *TINY, "trainer.max_steps=3", "trainer.val_check_interval=3", "data.packing=blocks", "data.block_size=32",
            "train.checkpoint.every_n_train_steps=1", "train.checkpoint.every_n_minutes=null", "train.checkpoint.keep_last=2",
            "train.average_last=2", f"data.cache_dir={tmp_path / 'cache'}", "--runs", tmp_path / "runs"]  # fmt: skip
    code, out, err = cli(*argv)
    assert code == 0, err
    results = json.loads((tmp_path / "runs" / "lm-demo" / "version_0" / "results.json").read_text())
    blocks = results["n_blocks"]
    assert (results["n_sentences"], results["block_size"], results["averaged_checkpoints"]) == (
        20,
        32,
        ["step00000002.ckpt", "step00000003.ckpt"],
    )
    assert blocks == math.ceil(results["n_tokens"] / 32) > 1  # every token predicted once, 32 a block
    assert (
        f" bits per byte on valid (20 sentences in {blocks} blocks of 32 tokens), the mean of the last 2 checkpoints; "
        in (out.splitlines()[-1])
    )


def test_a_length_filter_that_keeps_no_sentence_is_named(tmp_path):
    """A language model's data.max_len below every sentence: a message, no run (a ValueError of the
    batch sampler, before)."""
    code, out, err = cli("train", LM, *TINY, "data.max_len=1", "trainer.max_steps=2", "--runs", tmp_path / "runs")
    assert (code, err.splitlines()[-1]) == (
        2, f"aiayn train: error: data: the length filter removed all 600 training sentences of {tmp_path / 'runs' / 'lm-demo' / 'version_0' / 'data' / 'train.en'} "
        "(600 longer than max_len=1, 0 shorter than min_len=1 tokens); raise max_len or lower min_len",
    )  # fmt: skip
    assert not (tmp_path / "runs").exists()


def test_score_of_a_language_model_sums_its_tokens_and_meets_evaluates_bits_per_byte(run, tmp_path):
    """aiayn score --text: each line's log P is the sum of its --per-token column, and over the file
    -sum(log P) / ln 2 / bytes is evaluate's bits per byte; the Python API gives the same numbers;
    each log-probability equals a teacher-forced pass of that line alone."""
    lines = generate_demo(600, 20, 20, 1234)["test"][0][:12]
    text = tmp_path / "text.en"
    text.write_text("".join(line + "\n" for line in lines))
    code, out, err = cli("score", run, "--text", text, "--per-token")
    assert code == 0, err
    rows = [row.split("\t") for row in out.splitlines()]
    assert len(rows) == len(lines) and all(len(row) == 4 for row in rows)
    for log_prob, length, per_token, bpb in rows:
        tokens = [float(x) for x in per_token.split()]
        assert len(tokens) == int(length) and float(log_prob) == pytest.approx(sum(tokens), abs=1e-5)
    total, n_bytes = sum(float(r[0]) for r in rows), sum(len(line.encode()) + 1 for line in lines)
    code, out, err = cli("evaluate", run, "--ref", text, "--json")
    assert code == 0, err
    assert -total / math.log(2) / n_bytes == pytest.approx(json.loads(out)["bpb"], rel=1e-5)
    model = load_run(run, device="cpu")
    scores = model.score(lines)
    assert [f"{s.log_prob:.6f}" for s in scores] == [r[0] for r in rows] and [f"{s.bpb:.6f}" for s in scores] == [
        r[3] for r in rows
    ]
    import torch

    one = model.tokenizer.encode(lines[3])
    with torch.no_grad():
        logits = model.model(torch.zeros(1, 0, dtype=torch.long), torch.tensor([[1, *one]])).log_softmax(-1)[0]
    alone = sum(float(logits[t, token]) for t, token in enumerate([*one, 2]))
    assert scores[3].log_prob == pytest.approx(alone, abs=1e-4) and scores[3].ids == one


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--src", "x"], "--text scores a language model's lines alone: drop --src"),
        (["--alignments"], "--text scores a language model's lines alone: drop --alignments"),
    ],
)
def test_what_score_of_a_language_model_refuses(run, tmp_path, extra, message):
    text = tmp_path / "text.en"
    text.write_text("two men\n")
    assert cli("score", run, "--text", text, *extra)[::2] == (2, f"aiayn score: error: {message}\n")


def test_score_of_a_language_model_names_what_is_missing_or_wrong(run, tmp_path):
    text = tmp_path / "text.en"
    text.write_text("two men\n\nthree dogs\n")
    assert cli("score", run, "--text", text)[::2] == (
        2, "aiayn score: error: line 2 is blank: a language model scores sentences (aiayn evaluate skips blank lines)\n"
    )  # fmt: skip
    assert cli("score", run)[::2] == (
        2, "aiayn score: error: give --src and --tgt (a translation model's pairs), or --text (a language model's lines)\n"
    )  # fmt: skip
    assert cli("score", run, "--text", tmp_path / "none.en")[::2] == (
        2, f"aiayn score: error: --text {tmp_path / 'none.en'}: no such file\n"
    )  # fmt: skip

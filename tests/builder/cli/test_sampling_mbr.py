"""aiayn translate --sampling / --unique / --mbr and the Python API's sampling=, unique=, mbr=: the
command line and Python agree; MBR's choice is the brute-force one (sacreBLEU's sentence scores of
every pair, averaged with the weights asked for); a utility of one's own registers and plugs in;
bad combinations are messages (exit 2)."""

import json
import math
from typing import Literal

import numpy as np
import pytest
from sacrebleu.metrics import CHRF

import aiayn
from aiayn import UtilitySpec, load_run
from aiayn.builder.cli import main
from aiayn.builder.decode.search import Hypothesis
from aiayn.builder.decode.strategy import unique_texts
from aiayn.builder.errors import UserError
from tests.builder.decode.test_checkpoint import make_run
from tests.conftest import registry

LINES = ["she sold eight apples", "we counted two pictures", "", "the dog"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("sampling"), seed=21)


@pytest.fixture(scope="module")
def translator(run):
    return load_run(run, device="cpu")


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "src.txt"
    path.write_text("".join(line + "\n" for line in LINES))
    return path


def rows(out: str) -> list[list[str]]:
    return [line.split("\t") for line in out.splitlines()]


def test_sampling_from_the_command_line_is_the_python_apis_and_a_seed_repeats(run, translator, source, capsys):
    argv = ["translate", str(run), "--input", str(source), "--sampling", "--n-best", "5", "--top-k", "20", "--scores"]
    assert main([*argv, "--seed", "3"]) == 0
    three = rows(capsys.readouterr().out)
    found = translator.translate(LINES, n_best=5, sampling=True, top_k=20, seed=3, with_scores=True)
    assert three == [[str(i), f"{t.score:.6f}", t.text] for i, group in enumerate(found) for t in group]
    assert [len(g) for g in found] == [5, 5, 1, 5]  # a blank line: its one empty translation
    assert main([*argv, "--seed", "3"]) == 0 and rows(capsys.readouterr().out) == three
    assert main([*argv, "--seed", "4"]) == 0 and rows(capsys.readouterr().out) != three
    # one sample a line without --n-best: plain lines, as a translation
    assert main(["translate", str(run), "--input", str(source), "--sampling", "--seed", "3"]) == 0
    assert capsys.readouterr().out.splitlines() == translator.translate(LINES, sampling=True, seed=3, n_best=None)


def test_unique_keeps_each_strings_best(translator):
    settings = dict(n_best=8, sampling=True, temperature=0.3, seed=5, with_scores=True)  # peaked: samples repeat
    found, unique = translator.translate(LINES, **settings), translator.translate(LINES, **settings, unique=True)
    for everything, kept in zip(found, unique):
        texts = [t.text for t in everything]
        assert [t.text for t in kept] == [t for i, t in enumerate(texts) if t not in texts[:i]]
        assert [t.score for t in kept] == [next(e.score for e in everything if e.text == t.text) for t in kept]
    assert any(len(k) < len(f) for k, f in zip(unique, found))  # samples repeat: the test says something


def test_unique_keeps_the_best_of_two_segmentations_of_one_string():
    """Two token sequences that a tokenizer decodes to one string (`dog` as one piece or as `d og`):
    --unique keeps the better scored, the first of the list (best first)."""
    hyps = [Hypothesis([7], -1.0, -1.0, True), Hypothesis([3, 4], -2.0, -2.0, True), Hypothesis([9], -3.0, -3.0, True),
            Hypothesis([3, 5], -4.0, -4.0, True)]  # fmt: skip
    found, texts = unique_texts([hyps], [["dog", "cat", "a dog", "cat"]])
    assert (texts, [[h.ids for h in group] for group in found]) == ([["dog", "cat", "a dog"]], [[[7], [3, 4], [9]]])
    found, texts = unique_texts([hyps[1:]], [["cat", "a dog", "cat"]])
    assert [h.score for h in found[0]] == [-2.0, -3.0]


def brute_force_mbr(candidates, references, log_probs, weights: str) -> tuple[int, float]:
    chrf = CHRF()
    scores = np.array([[chrf.sentence_score(c, [r]).score for r in references] for c in candidates])
    if weights == "uniform":
        w = np.ones(len(references)) / len(references)
    else:
        p = np.array([math.exp(x) for x in log_probs])
        w = p / p.sum()
    expected = scores @ w
    return int(np.argmax(expected)), float(expected.max())


@pytest.mark.parametrize("weights", ["uniform", "model"])
def test_mbr_over_the_beams_n_best_is_the_brute_force_choice(run, translator, source, weights, capsys):
    assert main(["translate", str(run), "--input", str(source), "--n-best", "4", "--mbr", "chrf", "--mbr-weights", weights,
                 "--scores"]) == 0  # fmt: skip
    chosen = rows(capsys.readouterr().out)
    nbest = translator.translate(LINES, n_best=4, with_scores=True)
    expected = []
    for i, group in enumerate(nbest):
        if not LINES[i]:
            expected.append([str(i), f"{0.0:.6f}", ""])
            continue
        best, value = brute_force_mbr([t.text for t in group], [t.text for t in group], [t.log_prob for t in group], weights)
        expected.append([str(i), f"{value:.6f}", group[best].text])
    assert chosen == expected
    python = translator.translate(LINES, n_best=4, mbr="chrf", mbr_weights=weights)
    assert python == [row[2] for row in expected]
    if weights == "uniform":  # the choice is not the search's best
        assert python != translator.translate(LINES)


def test_mbr_over_samples_against_samples_drawn_apart(translator):
    chosen = translator.translate(LINES, n_best=6, sampling=True, seed=7, mbr="chrf", mbr_references=10, with_scores=True)
    candidates = translator.translate(LINES, n_best=6, sampling=True, seed=7, with_scores=True)
    references = translator.translate(LINES, n_best=10, sampling=True, seed=8, with_scores=True)
    for line, [pick], cands, refs in zip(LINES, chosen, candidates, references):
        if not line:
            continue
        best, value = brute_force_mbr([t.text for t in cands], [t.text for t in refs], [], "uniform")
        assert (pick.text, pick.utility) == (cands[best].text, pytest.approx(value, abs=1e-9))


class Overlap(UtilitySpec):
    """A utility of one's own: the share of the reference's words the candidate has."""

    type: Literal["word_overlap"] = "word_overlap"


def overlap(spec):
    def utility(candidates, references):
        return np.array([[len(set(c.split()) & set(r.split())) / max(len(r.split()), 1) for r in references] for c in candidates])

    return utility


def test_a_utility_of_ones_own_plugs_in(run):
    def register(registry) -> None:
        registry.add(Overlap, slot="utility", build=overlap)
        registry.add(type("Broken", (UtilitySpec,), {"__annotations__": {"type": Literal["broken"]}, "type": "broken"}),
                       slot="utility", build=lambda spec: lambda c, r: np.zeros(3))  # fmt: skip

    translator = load_run(run, device="cpu", registry=registry().extended(register))
    chosen = translator.translate(LINES, n_best=4, mbr="word_overlap", with_scores=True)
    nbest = translator.translate(LINES, n_best=4)
    for i, group in enumerate(nbest):
        if LINES[i]:
            expected = overlap(None)(group, group).mean(axis=1)
            assert chosen[i][0].text == group[int(np.argmax(expected))]
            assert chosen[i][0].utility == pytest.approx(float(expected.max()))
    with pytest.raises(
        aiayn.PluginError,
        match=r"^an MBR utility must return a finite array of shape \(candidates, references\) = \(4, 4\), got shape \(3,\)$",
    ):
        translator.translate(LINES[:1], n_best=4, mbr="broken")


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--mbr", "chrf"], "--mbr: it chooses among candidates; give --n-best >= 2 (the beam's best, or samples with --sampling)"),
        (["--mbr", "chrff", "--n-best", "2"], "--mbr: 'chrff' is not a utility type; the registered ones are chrf, bleu; did you mean 'chrf'?"),
        (["--mbr", "{type: chrf, beta: 0}", "--n-best", "2"], "--mbr: beta: input should be greater than 0, got 0"),
        (["--mbr-references", "3"], "--mbr-references goes with --mbr; give --mbr, or drop it"),
        (["--sampling", "--top-p", "0"], "--top-p (0.0) must be in (0, 1]"),
        (["--sampling", "--epsilon", "1"], "--epsilon (1.0) must be in [0, 1) (0: no limit)"),
        (["--temperature", "2"], "--temperature: it shapes sampling; give --sampling, or drop it"),
        (["--sampling", "--seed", "99999999999999999999"], "--seed: expected a whole number from 0 to 2**63 - 1, got int 99999999999999999999"),
        (["--sampling", "--beam", "4"], "--beam: sampling draws each token and keeps no beam; give --beam or --sampling, not both"),
        (["--seed", "-5"], "--seed: expected a whole number from 0 to 2**63 - 1, got int -5"),  # its flag, not `seed`, without --sampling too
        (["--n-best", "5"], "--n-best (5) is more than the beam size (4): a search keeps 4 hypotheses a sentence; raise --beam to at least 5"),
    ],
)  # fmt: skip
def test_bad_combinations_are_messages(run, source, flags, message, capsys):
    assert main(["translate", str(run), "--input", str(source), *flags]) == 2
    assert capsys.readouterr().err == f"aiayn translate: error: {message}\n"


def test_the_python_api_refuses_the_same_by_name(translator):
    for kwargs, message in [
        (
            dict(mbr="chrf"),
            "mbr: it chooses among candidates; give n_best >= 2 (the beam's best, or samples with sampling=True)",
        ),
        (dict(top_p=0.5), "top_p: it shapes sampling; give sampling=True, or drop it"),
        (dict(sampling=True, beam=4), "beam: sampling draws each token and keeps no beam; give beam or sampling=True, not both"),
        (dict(mbr_references=3), "mbr_references goes with mbr; give mbr, or drop it"),  # the CLI's rule, the same function
        (dict(sampling=True, top_k=-1), "top_k (-1) must be >= 0 (0: no limit)"),
        (dict(sampling=True, seed="1"), "seed: expected a whole number from 0 to 2**63 - 1, got str '1'"),
        (dict(n_best=2, mbr="chrf", mbr_weights="prob"), "mbr_weights: expected one of uniform, model, got str 'prob'"),
    ]:
        with pytest.raises(UserError) as e:
            translator.translate(LINES, **kwargs)
        assert str(e.value) == message


def test_evaluate_scores_the_mbr_choice_and_samples(run, translator, source, tmp_path, capsys):
    ref = tmp_path / "ref.txt"
    ref.write_text("".join(line + "\n" for line in ["she sold eight apples", "we counted two pictures", "x", "the dog"]))
    hyps = tmp_path / "hyps.txt"
    assert main(["evaluate", str(run), "--src", str(source), "--ref", str(ref), "--n-best", "4", "--mbr", "chrf", "--json",
                 "--hyps", str(hyps)]) == 0  # fmt: skip
    result = json.loads(capsys.readouterr().out)
    assert hyps.read_text().splitlines() == translator.translate(LINES, n_best=4, mbr="chrf")
    assert result["mbr"] == {"utility": {"type": "chrf", "char_order": 6, "word_order": 0, "beta": 2}, "candidates": 4,
                             "weights": "uniform", "references": "the candidates"}  # fmt: skip
    assert main(["evaluate", str(run), "--src", str(source), "--ref", str(ref), "--sampling", "--seed", "2", "--json",
                 "--hyps", str(hyps)]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["sampling"] == {"seed": 2}
    assert hyps.read_text().splitlines() == translator.translate(LINES, sampling=True, seed=2)
    assert main(["evaluate", str(run), "--src", str(source), "--ref", str(ref), "--n-best", "4"]) == 2
    assert capsys.readouterr().err == (
        "aiayn evaluate: error: --n-best: evaluate scores one translation a line; give it with --mbr (its candidates)\n"
    )

"""aiayn translate / score / evaluate RUN1 RUN2: an ensemble from the command line and from Python
gives the same n-best lists; forced scoring of its output gives its beam scores; runs that read
different tokens, language models and alignments of an ensemble are refused by name (exit 2)."""

import json

import pytest

from aiayn import load_run
from aiayn.builder.cli import main
from aiayn.builder.data.bpe import train_tokenizer
from aiayn.builder.data.demo import generate_demo
from aiayn.builder.errors import UserError
from tests.builder.decode.test_checkpoint import make_run

LINES = ["she sold eight apples", "we counted two pictures", "the dog"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ensemble")
    return [make_run(root / name, seed=seed) for name, seed in (("a", 3), ("b", 4))]


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "src.txt"
    path.write_text("".join(line + "\n" for line in LINES))
    return path


def test_the_command_line_ensemble_is_the_python_one(runs, source, tmp_path, capsys):
    a, b = runs
    assert main(["translate", str(a), str(b), "--input", str(source), "--n-best", "2", "--scores", "--beam", "3"]) == 0
    out, err = capsys.readouterr()
    rows = [line.split("\t") for line in out.splitlines()]
    ensemble = load_run([a, b], device="cpu")
    found = ensemble.translate(LINES, n_best=2, with_scores=True, beam=3)
    assert rows == [[str(i), f"{t.score:.6f}", t.text] for i, group in enumerate(found) for t in group]
    assert err.startswith("aiayn translate: translated with an ensemble of 2: ")
    alone = load_run(a, device="cpu").translate(LINES, n_best=2, with_scores=True, beam=3)
    assert [[t.score for t in g] for g in alone] != [[t.score for t in g] for g in found]  # not its first member

    # forced scoring from the command line is the Python API's (ids-level: tests/builder/decode/test_ensemble.py)
    best = tmp_path / "best.txt"
    best.write_text("".join(group[0].text + "\n" for group in found))
    assert main(["score", str(a), str(b), "--src", str(source), "--tgt", str(best)]) == 0
    columns = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    expected = ensemble.score(LINES, [group[0].text for group in found])
    assert [(float(c[0]), int(c[1]), float(c[-1])) for c in columns] == [
        (pytest.approx(s.log_prob, abs=1e-5), s.length, pytest.approx(s.score, abs=1e-5)) for s in expected
    ]
    assert expected != load_run(a, device="cpu").score(LINES, [group[0].text for group in found])

    # evaluate scores the ensemble's translations
    assert main(["evaluate", str(a), str(b), "--src", str(source), "--ref", str(best), "--beam", "3", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["model"].startswith("an ensemble of 2: ") and result["n_sentences"] == 3


def test_an_ensemble_of_a_run_with_itself_translates_as_the_run(runs):
    a, _ = runs
    assert load_run([a, a], device="cpu").translate(LINES, beam=3) == load_run(a, device="cpu").translate(LINES, beam=3)
    # a float32 run's scores: the log of a mean of two equal probabilities, to float32's precision (1e-9 in float64)
    one, two = (load_run(r, device="cpu").translate(LINES, beam=3, n_best=3, with_scores=True) for r in (a, [a, a]))
    assert [[h.text for h in g] for g in two] == [[h.text for h in g] for g in one]
    assert max(abs(x.score - y.score) for g, h in zip(one, two) for x, y in zip(g, h)) < 1e-5


def test_runs_that_read_different_tokens_are_refused(runs, source, tmp_path, capsys):
    a, _ = runs
    other = make_run(tmp_path / "other", seed=5)
    en, de = generate_demo(200, 5, 7, 99)["train"]
    train_tokenizer(en + de, 45).save(other / "tokenizer.json")
    assert main(["translate", str(a), str(other), "--input", str(source)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"aiayn translate: error: {other} cannot join an ensemble with {a}: their source vocabularies differ (")
    assert err.rstrip().endswith("); ensemble models trained with one tokenizer")
    with pytest.raises(UserError, match=r"^paths: an ensemble takes a list of two or more models, got a list of 1$"):
        __import__("aiayn").load_ensemble([a])


@pytest.mark.parametrize("verb", ["translate", "score"])
def test_alignments_of_an_ensemble_are_refused(runs, source, verb, capsys):
    a, b = runs
    files = ["--input", str(source)] if verb == "translate" else ["--src", str(source), "--tgt", str(source)]
    assert main([verb, str(a), str(b), *files, "--alignments"]) == 2
    assert capsys.readouterr().err == (
        f"aiayn {verb}: error: --alignments: the members of an ensemble each attend their own way; align with one of its models\n"
    )

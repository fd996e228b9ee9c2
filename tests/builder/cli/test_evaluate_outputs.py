"""aiayn evaluate --hyps-from F scores given outputs exactly as aiayn scores its own (the model's own
outputs given back score to the same numbers; others to sacreBLEU's on the same lines), and
--against F2 is sacreBLEU's paired bootstrap between the two; what does not go with them is one line."""

import json

import pytest
from sacrebleu.metrics import BLEU

from aiayn.builder.cli import main
from aiayn.builder.sweep.significance import paired_bootstrap, sentence_stats
from tests.builder.cli.test_sampling_mbr import LINES, run, source, translator  # noqa: F401  (fixtures)

REFS = ["she sold eight apples", "we counted two pictures", "x", "the dog"]


@pytest.fixture
def ref(tmp_path):
    path = tmp_path / "ref.txt"
    path.write_text("".join(line + "\n" for line in REFS))
    return path


def evaluate(capsys, run, source, ref, *flags):  # noqa: F811
    code = main(["evaluate", str(run), "--src", str(source), "--ref", str(ref), "--json", *map(str, flags)])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_the_models_own_outputs_given_back_score_as_its_evaluation(run, source, ref, tmp_path, capsys):  # noqa: F811
    hyps = tmp_path / "hyps.txt"
    own = evaluate(capsys, run, source, ref, "--hyps", hyps)
    given = evaluate(capsys, run, source, ref, "--hyps-from", hyps)
    assert given.pop("outputs") == str(hyps) and given == own  # BLEU, chrF, their signatures, PPL, the decode settings
    other = ["she sold eight apples", "we counted two dogs", "", "a dog"]
    path = tmp_path / "other.txt"
    path.write_text("".join(line + "\n" for line in other))
    scored = evaluate(capsys, run, source, ref, "--hyps-from", path)
    assert scored["bleu"] == pytest.approx(BLEU().corpus_score(other, [REFS]).score, abs=0.01) and scored["ppl"] == own["ppl"]
    main(["evaluate", str(run), "--src", str(source), "--ref", str(ref), "--hyps-from", str(path)])
    assert f"outputs     {path}, scored as given (not translated)" in capsys.readouterr().out.splitlines()


def test_against_is_the_paired_bootstrap_of_the_two(run, translator, source, ref, tmp_path, capsys):  # noqa: F811
    other = ["she sold eight apples", "we counted two dogs", "", "a dog"]
    path = tmp_path / "other.txt"
    path.write_text("".join(line + "\n" for line in other))
    result = evaluate(capsys, run, source, ref, "--against", path)
    mine = translator.translate(LINES)
    difference = paired_bootstrap([(sentence_stats(other, REFS), sentence_stats(mine, REFS))])
    assert result["against"] == {
        "file": str(path), "bleu": round(BLEU().corpus_score(other, [REFS]).score, 2), "delta_bleu": round(difference.delta, 2),
        "interval": [round(difference.low, 2), round(difference.high, 2)], "p": round(difference.p, 4), "samples": 1000,
    }  # fmt: skip
    assert result["against"]["delta_bleu"] == pytest.approx(result["bleu"] - result["against"]["bleu"], abs=0.011)
    same = evaluate(capsys, run, source, ref, "--hyps-from", path, "--against", path)["against"]
    assert (same["delta_bleu"], same["interval"]) == (0.0, [0.0, 0.0])


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--hyps-from", "{short}"], "--hyps-from {short} has 2 lines, and there are 4 references: give one output a line"),
        (["--hyps-from", "{short}", "--sampling"], "--sampling: --hyps-from's outputs are scored as they are; drop one of them"),
        (["--against", "{missing}"], "--against {missing}: no such file"),
    ],
)
def test_what_does_not_go_with_given_outputs_is_one_line(run, source, ref, tmp_path, capsys, flags, message):  # noqa: F811
    short, missing = tmp_path / "short.txt", tmp_path / "missing.txt"
    short.write_text("a\nb\n")
    flags = [f.format(short=short, missing=missing) for f in flags]
    assert main(["evaluate", str(run), "--src", str(source), "--ref", str(ref), *flags]) == 2
    assert capsys.readouterr().err == f"aiayn evaluate: error: {message.format(short=short, missing=missing)}\n"

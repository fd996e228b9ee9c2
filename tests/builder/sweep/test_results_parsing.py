"""`aiayn results` of parsing runs: their bracketing F1 (results.json's parse_f1, EVALB's) and the
F1 of their outputs repaired (parse_f1_repaired) are columns of the table and of the CSV, pooled
over seeds as BLEU is, with a line saying what each is; a parser has no BLEU."""

import csv
import json

import pytest

from aiayn.builder.cli import main
from tests.builder.sweep.test_sweep_results import put


def parsing_run(root, trial, *, seed, f1, repaired):
    put(root, trial, trial, ppl=1.5, bleu=None, variant=trial.rsplit("-seed", 1)[0], seed=seed)
    path = root / trial / "version_0" / "results.json"
    scores = {"parse_f1": f1, "parse_recall": f1, "parse_precision": f1, "parse_f1_repaired": repaired}
    path.write_text(json.dumps({**json.loads(path.read_text()), **scores}))


def test_a_sweep_of_parsing_runs_has_an_f1_column(tmp_path, capsys):
    root = tmp_path / "wsj"
    parsing_run(root, "wsj-seed1", seed=1, f1=90.0, repaired=91.0)
    parsing_run(root, "wsj-seed2", seed=2, f1=92.0, repaired=92.5)
    parsing_run(root, "wsj-small-seed1", seed=1, f1=85.5, repaired=86.0)
    assert main(["results", str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    head = [cell.strip() for cell in out[0].strip("|").split("|")]
    f1 = head.index("F1 (brackets)")
    assert (head[f1 - 1], head[f1 + 1]) == ("PPL", "F1 (repaired)") and "BLEU" not in head
    rows = [[cell.strip() for cell in row.strip("|").split("|")] for row in out[2:4]]
    cells = {row[head.index("variant")]: row for row in rows}
    assert (cells["wsj"][f1], cells["wsj-small"][f1], cells["wsj"][f1 + 1]) == ("91.00 ± 1.41", "85.50", "91.75 ± 1.06")
    assert (
        "F1 (brackets): a parsing run's labelled bracketing F1 of the validation split's trees, EVALB's rules (COLLINS.prm), on "
        "the output as it is (an unbalanced or empty tree an error sentence, as EVALB counts it); F1 (repaired): the same with "
        "the outputs' brackets mended first (stray and empty ones dropped, open ones closed), not EVALB's number." in out
    )
    with open(root / "results.csv", newline="") as f:
        rows = {row["variant"]: row for row in csv.DictReader(f)}
    assert float(rows["wsj"]["parse_f1"]) == 91.0 and float(rows["wsj"]["parse_f1_std"]) == pytest.approx(2**0.5)
    assert (float(rows["wsj-small"]["parse_f1"]), rows["wsj-small"]["parse_f1_std"]) == (85.5, "")
    assert (float(rows["wsj"]["parse_f1_repaired"]), rows["wsj"]["bleu"]) == (91.75, "")


def test_translation_runs_have_no_f1_column(tmp_path, capsys):
    put(tmp_path / "runs", "tiny", "tiny", ppl=5.0, bleu=30.0)
    assert main(["results", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "F1" not in out
    with open(tmp_path / "runs" / "results.csv", newline="") as f:
        assert [(row["parse_f1"], row["parse_f1_std"]) for row in csv.DictReader(f)] == [("", "")]

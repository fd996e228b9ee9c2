"""docs/graphs-multi30k.md's table is what `aiayn results` makes of the trials kept in
docs/results/graphs-multi30k (benchmarks/keep_trials.py: each finished trial's results.json,
config, validation and test translations, no checkpoint): anyone can check the page against the
runs, and add seeds to the folder later."""

import shutil

from tests.conftest import ROOT
from tests.experiments.corpora import aiayn

KEPT = ROOT / "docs" / "results" / "graphs-multi30k"
PAGE = ROOT / "docs" / "graphs-multi30k.md"
BEGIN, END = "<!-- aiayn results docs/results/graphs-multi30k --split test --base encoder-decoder -->", "<!-- end -->"


def table(markdown: str) -> list[list[str]]:
    """The cells of the first markdown table in `markdown`, but its "model" column (links to
    figures drawn beside the runs, not in the manual)."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines[start:end]]
    keep = [j for j, name in enumerate(rows[0]) if name != "model"]
    return [[row[j] for j in keep] for row in rows]


def test_the_pages_table_is_aiayn_results_of_the_kept_trials(tmp_path):
    copy = tmp_path / "graphs-multi30k"
    shutil.copytree(KEPT, copy)  # aiayn results writes its table and figures beside the runs
    code, out, err = aiayn("results", copy, "--split", "test", "--base", "encoder-decoder")
    assert code == 0, err
    text = PAGE.read_text(encoding="utf-8")
    shown = text[text.index(BEGIN) + len(BEGIN) : text.index(END)]
    assert table(shown) == table(out)
    assert not list(KEPT.rglob("*.ckpt"))  # evidence, not weights


def test_the_last_checkpoints_scores_are_the_kept_ones():
    """The page's table of each trial's last checkpoint (not averaged) is its kept
    last-checkpoint.test.json (`aiayn evaluate RUN/checkpoints/step00001200.ckpt --split test`)."""
    import json

    text = PAGE.read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| ") and " seed " in line.split("|")[1]]
    assert rows
    for row in rows:
        name, *_, bleu, ppl = [cell.strip() for cell in row.strip().strip("|").split("|")]
        trial = name.replace(" seed ", "-seed")
        [found] = (KEPT / trial).glob("version_*/last-checkpoint.test.json")  # the run its trial.json names
        kept = json.loads(found.read_text())
        assert (bleu, ppl) == (f"{kept['bleu']:.2f}", f"{kept['ppl']:.2f}")

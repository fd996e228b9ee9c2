"""docs/graphs-multi30k.md's tables are what `aiayn results` makes of the trials kept in
docs/results/graphs-multi30k (the three seeds of each graph) and docs/results/graphs-multi30k-lr2
(one seed each at half the peak learning rate) (benchmarks/keep_trials.py: each finished trial's
results.json, config, validation and test translations, no checkpoint): anyone can check the page
against the runs, and add seeds to the folder later."""

import json
import shutil

import pytest

from tests.conftest import ROOT
from tests.experiments.corpora import aiayn

RESULTS = ROOT / "docs" / "results"
PAGE = ROOT / "docs" / "graphs-multi30k.md"
FOLDERS = {"0.005": "graphs-multi30k", "0.0025": "graphs-multi30k-lr2"}  # the peak learning rate of each kept sweep
END = "<!-- end -->"


def table(markdown: str) -> list[list[str]]:
    """The cells of the first markdown table in `markdown`, but its "model" column (links to
    figures drawn beside the runs, not in the manual)."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines[start:end]]
    keep = [j for j, name in enumerate(rows[0]) if name != "model"]
    return [[row[j] for j in keep] for row in rows]


@pytest.mark.parametrize("folder", FOLDERS.values())
def test_the_pages_table_is_aiayn_results_of_the_kept_trials(tmp_path, folder):
    kept = RESULTS / folder
    copy = tmp_path / folder
    shutil.copytree(kept, copy)  # aiayn results writes its table and figures beside the runs
    code, out, err = aiayn("results", copy, "--split", "test", "--base", "encoder-decoder")
    assert code == 0, err
    text = PAGE.read_text(encoding="utf-8")
    begin = f"<!-- aiayn results docs/results/{folder} --split test --base encoder-decoder -->"
    shown = text[text.index(begin) + len(begin) : text.index(END, text.index(begin))]
    assert table(shown) == table(out)
    assert not list(kept.rglob("*.ckpt"))  # evidence, not weights


def test_the_last_checkpoints_scores_are_the_kept_ones():
    """The page's table of each trial's last checkpoint (not averaged) is its kept
    last-checkpoint.test.json (`aiayn evaluate RUN/checkpoints/step00001200.ckpt --split test`)."""
    text = PAGE.read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| ") and " seed " in line.split("|")[1]]
    assert len(rows) == sum(len(list((RESULTS / folder).glob("*/trial.json"))) for folder in FOLDERS.values())
    for row in rows:
        name, lr, *_, bleu, ppl = [cell.strip() for cell in row.strip().strip("|").split("|")]
        trial = name.replace(" seed ", "-seed")
        [found] = (RESULTS / FOLDERS[lr] / trial).glob("version_*/last-checkpoint.test.json")  # the run its trial.json names
        kept = json.loads(found.read_text())
        assert (bleu, ppl) == (f"{kept['bleu']:.2f}", f"{kept['ppl']:.2f}")

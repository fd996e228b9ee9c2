"""builder/sweep/bleu_parts.py (`aiayn results --bleu-parts`): BLEU in parts as sacreBLEU scores it,
and the interval of the mean over seeds and sentences against the reported BLEU."""

import json
import random
import shutil

import numpy as np
import pytest
from sacrebleu import significance
from sacrebleu.metrics import BLEU

from aiayn.builder.data.scoring import DETOKENIZED, Scoring
from aiayn.builder.sweep.bleu_parts import mean_interval, parts
from aiayn.builder.sweep.significance import corpus_bleu, sentence_stats
from tests.conftest import ROOT
from tests.experiments.corpora import aiayn

WORDS = "the a dog cat sat ran on under mat tree big small red".split()


def outputs(seed: int, n: int = 120) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    refs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(n)]
    hyps = [" ".join(w if rng.random() < 0.7 else rng.choice(WORDS) for w in r.split()[: rng.randint(2, 12)]) for r in refs]
    return hyps, refs


def test_the_parts_are_sacrebleus():
    hyps, refs = outputs(1)
    score = BLEU().corpus_score(hyps, [refs])
    assert parts((hyps, refs), DETOKENIZED) == [score.score, score.bp, *score.precisions]
    lc = BLEU(lowercase=True, tokenize="none").corpus_score([h.upper() for h in hyps], [refs])
    signature = "nrefs:1|case:lc|eff:no|tok:none|smooth:exp|version:2.6.0"  # a tokenized experiment's scoring
    assert parts(([h.upper() for h in hyps], refs), Scoring.of_signature(signature))[0] == pytest.approx(lc.score)


def test_one_seeds_interval_is_sacrebleus_bootstrap_and_copies_of_it_change_nothing():
    hyps, refs = outputs(2)
    stats = sentence_stats(hyps, refs)
    mean, low, high = mean_interval([stats])
    _, scores = significance._bootstrap_resample(BLEU()._extract_corpus_statistics(hyps, [refs]), BLEU(), 1000)
    ordered = np.sort([s.score for s in scores])
    assert (low, high) == pytest.approx((ordered[25], ordered[974]), abs=1e-5)  # its seed 12345, its 1/40 rule (float32 sums)
    assert mean == pytest.approx(BLEU().corpus_score(hyps, [refs]).score) and low < mean < high
    assert mean_interval([stats, stats, stats]) == pytest.approx((mean, low, high))  # seeds alike: the sentences' alone


def test_seeds_that_differ_widen_the_interval_of_their_mean():
    runs = [sentence_stats(*outputs(s)) for s in (3, 3, 3)]
    runs[1] = sentence_stats(*outputs(4))
    same = mean_interval([runs[0]] * 3)
    mixed = mean_interval(runs)
    assert mixed[0] == pytest.approx(np.mean([corpus_bleu(r.sum(0)) for r in runs]))
    assert mixed[1] <= mixed[0] <= mixed[2] and same != pytest.approx(mixed)
    with pytest.raises(ValueError, match="every seed must have translated the same sentences"):
        mean_interval([runs[0], runs[0][:-1]])


def test_results_bleu_parts_of_the_kept_graph_trials(tmp_path):
    """The section of `aiayn results --bleu-parts` on the kept graph trials: a line a seed as
    sacreBLEU scores its test translations, the mean ± std, and where the reported 41.02 falls."""
    copy = tmp_path / "graphs"
    shutil.copytree(ROOT / "docs" / "results" / "graphs-multi30k", copy)
    code, out, err = aiayn("results", copy, "--split", "test", "--base", "encoder-decoder", "--bleu-parts")
    assert code == 0, err
    section = out[out.index("## BLEU in parts (test)") :]
    rows = [line for line in section.splitlines() if line.startswith("| encoder-decoder |")]
    assert len(rows) == 4 and rows[-1].startswith("| encoder-decoder | mean ± std of 3 | 29.50 ± 0.21 | ")
    scores = copy / "scores" / "encoder-decoder-seed1" / "version_0"
    hyps, refs = ((scores / f"test.{s}").read_text().splitlines() for s in ("hyp", "ref"))
    signature = json.loads((copy / "encoder-decoder-seed1" / "version_0" / "results.json").read_text())["sacrebleu_signature"]
    own = Scoring.of_signature(signature).bleu().corpus_score(hyps, [refs])
    assert (
        rows[0]
        == f"| encoder-decoder | seed 1 | {own.score:.2f} | {own.bp:.3f} | "
        + " | ".join(f"{p:.1f}" for p in own.precisions)
        + " | | |"
    )
    assert rows[-1].endswith(" | 41.02: above it |") and "‡" not in rows[-1]

"""`aiayn results DIR --bleu-parts`: each row's BLEU taken apart as sacreBLEU reports it (the
brevity penalty and the 1- to 4-gram precisions), a line for each seed and their mean ± std, and,
where the experiment reports a BLEU (its `reported.bleu`, the literature's), the 95% interval of
the mean BLEU over the seeds and the sentences against it: each of 1000 resamples draws the
sentences (as the paired test draws them) and the seeds with replacement, and takes the drawn
seeds' mean BLEU on the drawn sentences (the 2.5th and 97.5th percentiles, sacreBLEU's 1/40 rule).
With one seed the interval covers the test set's sampling alone; with two, a resample of the seeds
has three distinct means: the interval says so."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from aiayn.builder.data.scoring import Scoring
from aiayn.builder.sweep.rows import Row, mean_std
from aiayn.builder.sweep.significance import MIN_SEEDS, SAMPLES, SEED, _resampled, corpus_bleu, sentence_stats

Pair = tuple[list[str], list[str]]  # (hypotheses, references)


def mean_interval(stats: Sequence[np.ndarray], samples: int = SAMPLES, seed: int = SEED) -> tuple[float, float, float]:
    """(the mean of the seeds' corpus BLEU, the low and high end of its 95% bootstrap interval);
    `stats`: each seed's sentence_stats over the same sentences."""
    n, k = len(stats[0]), len(stats)
    if any(len(s) != n for s in stats):
        raise ValueError("the interval of the mean: every seed must have translated the same sentences")
    rng = np.random.default_rng(seed)
    sentences = rng.choice(n, size=(samples, n), replace=True)
    seeds = rng.choice(k, size=(samples, k), replace=True) if k > 1 else np.zeros((samples, 1), dtype=int)
    per_seed = np.array([_resampled(s, sentences) for s in stats])  # (k, samples)
    ordered = np.sort(per_seed[seeds, np.arange(samples)[:, None]].mean(axis=1))
    mean = float(np.mean([corpus_bleu(s.sum(0)) for s in stats]))
    return mean, float(ordered[samples // 40]), float(ordered[samples - samples // 40 - 1])


def parts(pair: Pair, scoring: Scoring) -> list[float]:
    """[BLEU, BP, p1, p2, p3, p4] of (hypotheses, references), as sacreBLEU scores them with `scoring`."""
    hyps, refs = pair
    score = scoring.bleu().corpus_score(hyps, [refs])
    return [score.score, score.bp, *score.precisions]


def section(rows: list[Row], translations: Callable[[Path], Pair | None], split: str) -> str:
    """The markdown section: per row, a line a seed and the mean ± std; the interval against the reported BLEU."""
    lines = [
        f"## BLEU in parts ({split})",
        "",
        "| variant | run | BLEU | BP | 1-gram | 2-gram | 3-gram | 4-gram | 95% interval of the mean | reported |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        pairs = [(seed, pair) for seed, run in row.runs if (pair := translations(run)) is not None]
        if not pairs or any(b is None for b in row.bleu):
            continue
        scoring = Scoring.of_signature(row.signature)
        each = [parts(pair, scoring) for _, pair in pairs]
        for (seed, _), values in zip(pairs, each):
            lines.append(f"| {row.variant} | seed {seed} | " + " | ".join(_number(v, i) for i, v in enumerate(values)) + " | | |")
        cells = [_mean_cell([v[i] for v in each], i) for i in range(6)]
        lines.append(
            f"| {row.variant} | mean ± std of {len(each)} | " + " | ".join(cells) + f" | {_against(row, pairs, scoring)} |"
        )
    return "\n".join(lines) + "\n"


DIGITS = (2, 3, 1, 1, 1, 1)  # BLEU, BP and the precisions, as sacreBLEU prints them


def _number(value: float, i: int) -> str:
    return f"{value:.{DIGITS[i]}f}"


def _mean_cell(values: list[float], i: int) -> str:
    mean, std = mean_std(tuple(values))
    return _number(mean, i) if std is None else f"{_number(mean, i)} ± {_number(std, i)}"


def _against(row: Row, pairs: list[tuple[int | None, Pair]], scoring: Scoring) -> str:
    """`[40.12, 41.80] | 41.02: inside` (the interval, then the reported BLEU and where it falls)."""
    stats = [sentence_stats(*pair, scoring) for _, pair in pairs]
    if len({len(s) for s in stats}) != 1:
        return "(the seeds translated different sentences) |"
    _, low, high = mean_interval(stats)
    few = "" if len(stats) >= MIN_SEEDS else f" (‡ {len(stats)} seed{'s' * (len(stats) > 1)})"
    reported = row.reported.get("bleu")
    if reported is None:
        return f"[{low:.2f}, {high:.2f}]{few} |"
    where = "inside" if low <= reported <= high else "above it" if reported > high else "below it"
    return f"[{low:.2f}, {high:.2f}]{few} | {reported:.2f}: {where}"

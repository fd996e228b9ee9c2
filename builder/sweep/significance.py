"""Is a variant's BLEU different from the base's, beyond what another test set or another
training run would change? A two-level paired bootstrap over the translations both runs saved
of the same sentences (Koehn 2004 for the sentences; Clark et al. 2011 on optimizer instability
for the seeds): each of 1000 resamples draws the sentences with replacement (numpy's
default_rng(12345), as sacreBLEU's `PairedTest(test_type="bs")` draws them) and the seed pairs
with replacement, and its difference is the mean over the drawn pairs of BLEU(variant) -
BLEU(base) on the drawn sentences. The interval of the difference is read from the same
resamples (the 2.5th and 97.5th percentiles, sacreBLEU's 1/40 rule), and so is the p-value of
the absolute difference (MultEval's form, sacreBLEU's computation).

Training variance widens the interval only where there are seeds to resample: with one seed per
variant the interval covers the test set's sampling alone (`covers_training`), and with two a
resample of the seeds has only three distinct means, too few to bound another run's difference:
below MIN_SEEDS pairs a difference is never called significant. `agree` counts the seeds whose own difference has the sign of
the mean. With one seed the test is exactly sacreBLEU's paired bootstrap.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sacrebleu.metrics import BLEU

from aiayn.builder.data.scoring import DETOKENIZED, Scoring
from aiayn.builder.run.rundir import RunDir

SAMPLES = 1000
SEED = 12345  # sacreBLEU's default for its paired tests (SACREBLEU_SEED)
LEVEL = 0.05
MIN_SEEDS = 3  # seed pairs below which no difference is called significant


@dataclass(frozen=True)
class Difference:
    """BLEU(variant) - BLEU(base) with its 95% bootstrap interval and p-value."""

    delta: float
    low: float
    high: float
    p: float
    pairs: int  # trials paired by seed
    agree: int = 0  # pairs whose own difference has the sign of delta

    @property
    def covers_training(self) -> bool:
        """Whether the interval resampled seeds too (more than one pair), not only sentences."""
        return self.pairs > 1

    @property
    def enough_seeds(self) -> bool:
        return self.pairs >= MIN_SEEDS

    @property
    def significant(self) -> bool:
        """At least MIN_SEEDS seeds and the sentences resampled, p < 0.05 and an interval without
        0. The interval guards sacreBLEU's p-value, which is 1/1001 for two identical outputs (no
        resample beats a zero difference)."""
        return self.enough_seeds and self.p < LEVEL and not self.low <= 0.0 <= self.high


def sentence_stats(hyps: Sequence[str], refs: Sequence[str], scoring: Scoring = DETOKENIZED) -> np.ndarray:
    """(n, 2 + 2 * 4): sys_len, ref_len, matching n-grams and hypothesis n-grams per sentence,
    as the runs' BLEU counts them (sacreBLEU's default, 13a, or a tokenized run's, tokenize none);
    their column sums give the corpus BLEU."""
    bleu = scoring.bleu()
    rows = []
    for hyp, ref in zip(hyps, refs, strict=True):
        s = bleu.corpus_score([hyp], [[ref]])
        rows.append([s.sys_len, s.ref_len, *s.counts, *s.totals])
    return np.array(rows, dtype=np.float32)  # float32 as sacreBLEU's test sums them


def corpus_bleu(stats: np.ndarray) -> float:
    """BLEU from summed statistics (a row of `sentence_stats(...).sum(0)`), smoothed as BLEU()."""
    order = BLEU().max_ngram_order
    sys_len, ref_len, correct, total = stats[0], stats[1], stats[2 : 2 + order], stats[2 + order :]
    return BLEU.compute_bleu(
        [int(c) for c in correct], [int(t) for t in total], int(sys_len), int(ref_len), smooth_method="exp"
    ).score


def paired_bootstrap(pairs: Sequence[tuple[np.ndarray, np.ndarray]], samples: int = SAMPLES, seed: int = SEED) -> Difference:
    """`pairs`: (base stats, variant stats) per seed, all over the same sentences."""
    n, k = len(pairs[0][0]), len(pairs)
    if any(len(base) != n or len(variant) != n for base, variant in pairs):
        raise ValueError("paired bootstrap: every run must have translated the same sentences")
    rng = np.random.default_rng(seed)
    sentences = rng.choice(n, size=(samples, n), replace=True)  # first: one pair is sacreBLEU's test exactly
    seeds = rng.choice(k, size=(samples, k), replace=True) if k > 1 else np.zeros((samples, 1), dtype=int)
    own = np.array([corpus_bleu(v.sum(0)) - corpus_bleu(b.sum(0)) for b, v in pairs])  # (k,) each seed's difference
    observed = float(own.mean())
    per_pair = np.array([_resampled(v, sentences) - _resampled(b, sentences) for b, v in pairs])  # (k, samples)
    resampled = per_pair[seeds, np.arange(samples)[:, None]].mean(axis=1)  # (samples,): the drawn pairs' mean
    ordered = np.sort(resampled)
    low, high = ordered[samples // 40], ordered[samples - samples // 40 - 1]
    spread = np.abs(resampled)
    p = (int(np.sum(spread - spread.mean() > abs(observed))) + 1) / (samples + 1)
    agree = int(np.sum(np.sign(own) == np.sign(observed))) if observed else 0
    return Difference(delta=observed, low=float(low), high=float(high), p=p, pairs=k, agree=agree)


def _resampled(stats: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return np.array([corpus_bleu(s.sum(0)) for s in stats[idx]])


def compare_to_base(
    trials: dict[str, list[tuple[int | None, Path]]],
    base: str,
    scoring: Scoring = DETOKENIZED,
    translations: Callable[[Path], tuple[list[str], list[str]] | None] = lambda run: RunDir(run).translations_of("valid"),
) -> dict[str, Difference]:
    """Each variant's Difference to `base`. `trials`: variant -> (seed, run directory) of its
    finished runs, all scored by `scoring`; `translations`: a run's (hypotheses, references) of
    the split compared (default: the validation translations it saved). A variant is left out
    when no seed of it has a run of the base, or when a run has no translations (older runs) or
    translated other sentences than its base."""
    stats: dict[Path, tuple[list[str], np.ndarray] | None] = {}

    def of(run_dir: Path) -> tuple[list[str], np.ndarray] | None:
        if run_dir not in stats:
            saved = translations(run_dir)
            stats[run_dir] = None if saved is None else (saved[1], sentence_stats(*saved, scoring))
        return stats[run_dir]

    base_by_seed = dict(reversed(trials.get(base, [])))  # the first run of a seed wins
    out = {}
    for variant, runs in trials.items():
        if variant == base:
            continue
        paired = [(of(base_by_seed[seed]), of(run_dir)) for seed, run_dir in dict(reversed(runs)).items() if seed in base_by_seed]
        both = [(b, v) for b, v in paired if b is not None and v is not None and b[0] == v[0]]
        if paired and len(both) == len(paired):  # every pair translated the same sentences
            out[variant] = paired_bootstrap([(b[1], v[1]) for b, v in both])
    return out

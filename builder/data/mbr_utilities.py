"""aiayn's own MBR utilities (schemas/mbr_utilities.py), registered as a plugin's are:
`registry.add(Spec, slot="utility", build=make)`, where make(spec) returns a function
(candidates, references) -> a (len(candidates), len(references)) array of scores, higher better.
These are sacreBLEU's sentence scores, one call a pair (a pair seen twice, as samples repeat, is
scored once)."""

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from aiayn.schemas.mbr_utilities import BleuUtility, ChrfUtility


class SentenceMetric:
    """A sacreBLEU metric's sentence score of every (candidate, reference) pair."""

    def __init__(self, metric: Any) -> None:
        self.metric = metric

    def __call__(self, candidates: Sequence[str], references: Sequence[str]) -> np.ndarray:
        seen: dict[tuple[str, str], float] = {}
        out = np.empty((len(candidates), len(references)), dtype=np.float64)
        for i, candidate in enumerate(candidates):
            for j, reference in enumerate(references):
                key = (candidate, reference)
                if key not in seen:
                    seen[key] = float(self.metric.sentence_score(candidate, [reference]).score)
                out[i, j] = seen[key]
        return out


def _chrf(spec: ChrfUtility) -> SentenceMetric:
    from sacrebleu.metrics import CHRF

    return SentenceMetric(CHRF(char_order=spec.char_order, word_order=spec.word_order, beta=spec.beta))


def _bleu(spec: BleuUtility) -> SentenceMetric:
    from sacrebleu.metrics import BLEU

    return SentenceMetric(BLEU(effective_order=True, tokenize=spec.tokenize))


def register_utilities(register: Callable[..., Any]) -> None:
    """Register the built-in utilities with `register` (a registering function's registry.add)."""
    register(ChrfUtility, slot="utility", build=_chrf, label=lambda s: "chrF++" if s.word_order == 2 else "chrF")
    register(BleuUtility, slot="utility", build=_bleu, label=lambda s: "BLEU")

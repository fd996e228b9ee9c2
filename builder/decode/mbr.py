"""Minimum-Bayes-risk decoding (Kumar & Byrne 2004; Freitag et al. 2022): of a source's
candidates (a beam's n-best, or samples), the one with the highest expected utility against
pseudo-references (the candidates themselves, or samples drawn apart), each reference weighted
alike (`uniform`: a Monte Carlo estimate where they are samples) or by the model's probability
renormalised over them (`model`: the n-best's usual weighting). The utility is a registered type
(schemas/mbr_utilities.py: chrF, BLEU; a plugin's, e.g. a neural metric): one call a source,
candidates x references, so that a utility can batch its pairs."""

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np
from pydantic import ValidationError

from aiayn.builder.decode.sampling import PYTHON_NAMES
from aiayn.builder.errors import UserError, described
from aiayn.builder.registry import Registry
from aiayn.builder.run.nesting import too_deep
from aiayn.builder.run.validation import format_validation_error
from aiayn.schemas.slots import PluginError
from aiayn.schemas.utility import UtilitySpec

Utility = Callable[[Sequence[str], Sequence[str]], Any]
Weights = Literal["uniform", "model"]
WEIGHTS = ("uniform", "model")


def utility_spec(value: object, registry: Registry, where: str = "mbr") -> UtilitySpec:
    """A utility named by its type ("chrf") or given with its settings ({"type": "chrf", "word_order": 2})."""
    if isinstance(value, UtilitySpec):
        return value
    data = {"type": value} if isinstance(value, str) else value
    if not isinstance(data, dict):
        raise UserError(
            f"{where}: expected a utility's type (chrf, bleu, ...) or a mapping with its type, got {described(value)}"
        )
    deep = too_deep(data)
    if deep is not None:
        raise UserError(f"{where}: {deep}")
    known = registry.classes("utility")
    tag = data.get("type")
    if tag not in known:
        near = difflib.get_close_matches(str(tag), list(known), n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise UserError(f"{where}: {tag!r} is not a utility type; the registered ones are {', '.join(known)}{hint}")
    try:
        return cast(UtilitySpec, known[tag].model_validate(data, context=registry.context))
    except ValidationError as e:
        raise UserError(f"{where}: " + "; ".join(format_validation_error(e, root=known[tag], registry=registry))) from None


def make_utility(spec: UtilitySpec, registry: Registry) -> Utility:
    """The function its registration builds."""
    return registry.registration(spec).build(spec)


def expected_utilities(
    utility: Utility, candidates: Sequence[str], references: Sequence[str], log_probs: Sequence[float], weights: Weights
) -> np.ndarray:
    """(len(candidates),) each candidate's utility against the references, averaged with the
    references' weights (`log_probs`: the model's log P of each reference, for `model`)."""
    scores = np.asarray(utility(candidates, references), dtype=np.float64)
    if scores.shape != (len(candidates), len(references)) or not np.isfinite(scores).all():
        raise PluginError(
            f"an MBR utility must return a finite array of shape (candidates, references) = ({len(candidates)}, "
            f"{len(references)}), got {'shape ' + str(scores.shape) if scores.shape != (len(candidates), len(references)) else 'a value that is not finite'}"
        )
    if weights == "uniform":
        w = np.full(len(references), 1.0 / len(references))
    else:
        lp = np.asarray(log_probs, dtype=np.float64)
        w = np.exp(lp - lp.max())
        w /= w.sum()
    return scores @ w


def mbr_choice(
    utility: Utility, candidates: Sequence[str], references: Sequence[str], log_probs: Sequence[float], weights: Weights
) -> tuple[int, float]:
    """(the index of the candidate of highest expected utility, the first of equals; its expected utility)."""
    expected = expected_utilities(utility, candidates, references, log_probs, weights)
    best = int(np.argmax(expected))
    return best, float(expected[best])


@dataclass(frozen=True)
class MBRChoice:
    """How minimum-Bayes-risk decoding chooses: its utility, the references' weights, and how many samples to draw as
    references (None: the candidates themselves)."""

    utility: UtilitySpec
    weights: Weights
    references: int | None


def check_mbr(mbr: bool, n_best: object, references: object, weights: object, names: Mapping[str, str] = PYTHON_NAMES) -> None:
    """What goes with MBR, the one place the CLI and the Python API check it: its settings need
    it; it needs n_best >= 2 candidates; references a count >= 1; weights one of WEIGHTS. `names`:
    how the caller names each setting."""
    name = lambda setting: names.get(setting, setting)  # noqa: E731
    if not mbr:
        for setting, given in (("mbr_references", references is not None), ("mbr_weights", weights != "uniform")):
            if given:
                raise UserError(f"{name(setting)} goes with {name('mbr')}; give {name('mbr')}, or drop it")
        return
    if weights not in WEIGHTS:
        raise UserError(f"{name('mbr_weights')}: expected one of {', '.join(WEIGHTS)}, got {described(weights)}")
    if references is not None and (not isinstance(references, int) or isinstance(references, bool) or references < 1):
        raise UserError(
            f"{name('mbr_references')}: expected a whole number >= 1 (samples to draw as pseudo-references), "
            f"got {described(references)}"
        )
    if not isinstance(n_best, int) or isinstance(n_best, bool) or n_best < 2:
        raise UserError(
            f"{name('mbr')}: it chooses among candidates; give {name('n_best')} >= 2 (the beam's best, or samples with "
            f"{name('sampling')})"
        )


def mbr_choice_of(mbr: Any, weights: object, references: object, n_best: object, registry: Registry) -> MBRChoice | None:
    """The MBR settings checked (None: no MBR)."""
    check_mbr(mbr is not None, n_best, references, weights)
    if mbr is None:
        return None
    return MBRChoice(utility_spec(mbr, registry, "mbr"), cast(Weights, weights), cast(int | None, references))

"""The Python API's decoding options (Translator.translate's keyword arguments, and so a request to
`aiayn serve`): the one Decoding they build, checked in their names, and the decode settings the
rest override. The CLI builds its Decoding from its flags (builder/cli/choice.py)."""

from collections.abc import Callable
from typing import Any

from aiayn.builder.decode.mbr import mbr_choice_of
from aiayn.builder.decode.sampling import sampler_of, seed_argument
from aiayn.builder.decode.strategy import Decoding, Sampled, check_n_best, strategy_of
from aiayn.builder.errors import UserError, bool_argument, described
from aiayn.builder.registry import Registry
from aiayn.schemas.decode import DecodeSpec

SHAPING = ("temperature", "top_k", "top_p", "epsilon", "filters")  # the options that shape sampling
# the options that build the Decoding (the rest override decode settings)
CHOICE_OPTIONS = ("strategy", "sampling", *SHAPING, "seed", "unique", "mbr", "mbr_weights", "mbr_references")


def decoding_of(
    given: Decoding | None,
    n_best: int | None,
    options: dict[str, Any],
    registry: Registry,
    settings_of: Callable[..., DecodeSpec],
) -> tuple[Decoding, DecodeSpec]:
    """The Decoding a call asks for (`given`, or built once from its `options`; its strategy the run's
    decode.strategy where none is named) and the decode settings (`settings_of`) the other options override."""
    chosen = {name: options.pop(name) for name in CHOICE_OPTIONS if name in options}
    if given is not None:
        return _given(given, n_best, chosen, registry, settings_of(**options))
    sampler = sampler_of(chosen.get("sampling", False), {name: chosen.get(name) for name in SHAPING}, options, registry)
    if sampler is not None and "strategy" in chosen:
        raise UserError("strategy: it says how to decode, and so does sampling=True; give one of them")
    seed = seed_argument(chosen.get("seed", 1))
    unique = bool_argument(chosen.get("unique", False), "unique")
    settings = settings_of(**options)
    strategy = Sampled(sampler) if sampler is not None else strategy_of(chosen.get("strategy", settings.strategy), registry)
    k = check_n_best(n_best, strategy.n_best_limit(settings), "n_best", "beam")
    mbr = mbr_choice_of(chosen.get("mbr"), chosen.get("mbr_weights", "uniform"), chosen.get("mbr_references"), n_best, registry)
    return Decoding(strategy, n_best=k, unique=unique, mbr=mbr, seed=seed), settings


def _given(
    given: Decoding, n_best: int | None, chosen: dict[str, Any], registry: Registry, settings: DecodeSpec
) -> tuple[Decoding, DecodeSpec]:
    """A Decoding handed in whole, checked against the call's other arguments."""
    if not isinstance(given, Decoding):
        raise UserError(f"decoding: expected an aiayn Decoding, got {described(given)}")
    if chosen:
        raise UserError(f"{next(iter(chosen))}: decoding says how to decode; give it there, or drop decoding")
    given = given.resolved(settings, registry)
    assert given.strategy is not None
    check_n_best(given.n_best, given.strategy.n_best_limit(settings), "decoding.n_best", "beam")
    if n_best is not None and n_best != given.n_best:
        raise UserError(f"n_best ({n_best}) differs from decoding.n_best ({given.n_best}): give one of them")
    return given, settings

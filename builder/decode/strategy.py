"""How a source's candidates are found: a decoding strategy is a value handed to the loop (fairseq2's
generator per algorithm), built once from the CLI's flags, the API's arguments or a server request,
and never re-spelled as keyword arguments on the way down.

A `Strategy` answers what the callers ask: the widest n-best list it can give (`n_best_limit`:
a beam's width, or any number of samples), whether it draws from a seeded generator (`draws`),
each source's `hypotheses`, best first, and a language model's `continuations` of prompts.
aiayn's three are the paper's `BeamSearch` (its settings are the decode section's: beam, alpha,
length_penalty, early_stopping), `Greedy` (a beam of 1 without a length penalty) and `Sampled`
(ancestral sampling with a `Sampling`: sampling.py). `Decoding` is what one translate call asks
for: the strategy, how many candidates a line, each text once, the MBR choice among them and the
seed of whatever draws.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
from pydantic import TypeAdapter, ValidationError
from torch import Tensor

from aiayn.blocks import TransformerModel
from aiayn.builder.decode.loop import TokenRules
from aiayn.builder.decode.mbr import MBRChoice
from aiayn.builder.decode.sampling import (
    Sampling,
    filters_of,
    sample_hypotheses,
    sampled_continuations,
    sampling_from,
    spec_error,
)
from aiayn.builder.decode.search import Hypothesis, beam_continuations, beam_hypotheses
from aiayn.builder.errors import UserError, bool_argument, described
from aiayn.builder.registry import Registry
from aiayn.schemas.decode import DecodeSpec
from aiayn.schemas.slots import AnyStrategy
from aiayn.schemas.strategy import StrategySpec

SHAPED = ("temperature", "top_k", "top_p", "epsilon")  # the numbers that shape sampling


@dataclass(frozen=True)
class Wanted:
    """What a strategy is asked for besides the model, the sources and the decode settings.

    :param n: candidates a source
    :param bos_id: the token every output follows
    :param eos_id: the token that ends one
    :param rules: what the search does to the next-token log-probabilities (loop.py's TokenRules)
    :param generator: what a strategy that draws draws from (seeded with the call's seed; a list: each
        source's or prompt's own)"""

    n: int
    bos_id: int
    eos_id: int
    rules: TokenRules = TokenRules()
    generator: torch.Generator | list[torch.Generator] | None = None


class Strategy:
    """A way to find each source's candidates (a value: frozen, compared by its settings)."""

    draws = False  # whether it draws from a generator seeded with the call's seed

    def n_best_limit(self, decode: DecodeSpec) -> int | None:
        """The most candidates a source it can give under `decode` (None: any number)."""
        return None

    def hypotheses(self, model: TransformerModel, src: Tensor, decode: DecodeSpec, wanted: Wanted) -> list[list[Hypothesis]]:
        """The `wanted.n` candidates of each sentence of src (B, S), best first, under `decode`'s length limits."""
        raise NotImplementedError

    def continuations(
        self, model: TransformerModel, prompts: Tensor, steps: int, decode: DecodeSpec, wanted: Wanted, use_cache: bool = True
    ) -> list[list[int]]:
        """A decoder-only model's continuation of each prompt of prompts (B, L) (`<s>` and its tokens,
        of one length), at most `steps` tokens, without </s> (use_cache False: the reference decoder)."""
        raise UserError(
            f"the strategy {type(self).__name__} finds a source's candidates and continues no prompt; generate with "
            "greedy, beam or sampling"
        )


@dataclass(frozen=True)
class BeamSearch(Strategy):
    """The paper's beam search (Sec. 6.1): decode.beam hypotheses, length-penalised by decode.alpha."""

    def n_best_limit(self, decode: DecodeSpec) -> int | None:
        return decode.beam

    def hypotheses(self, model: TransformerModel, src: Tensor, decode: DecodeSpec, wanted: Wanted) -> list[list[Hypothesis]]:
        return beam_hypotheses(
            model,
            src,
            bos_id=wanted.bos_id,
            eos_id=wanted.eos_id,
            beam=decode.beam,
            n_best=wanted.n,
            early_stopping=decode.early_stopping,
            rules=wanted.rules,
            **limits(decode),
        )

    def continuations(
        self, model: TransformerModel, prompts: Tensor, steps: int, decode: DecodeSpec, wanted: Wanted, use_cache: bool = True
    ) -> list[list[int]]:
        return beam_continuations(
            model,
            prompts,
            steps=steps,
            eos_id=wanted.eos_id,
            beam=decode.beam,
            alpha=decode.alpha,
            length_penalty=decode.length_penalty,
            early_stopping=decode.early_stopping,
            rules=wanted.rules,
            use_cache=use_cache,
        )


@dataclass(frozen=True)
class Greedy(Strategy):
    """The most probable token at every step until </s> (a beam of 1 without a length penalty:
    fairseq's rule makes it exactly that), one candidate a source, scored by log P(Y | X)."""

    def n_best_limit(self, decode: DecodeSpec) -> int | None:
        return 1

    def hypotheses(self, model: TransformerModel, src: Tensor, decode: DecodeSpec, wanted: Wanted) -> list[list[Hypothesis]]:
        return BeamSearch().hypotheses(model, src, decode.model_copy(update={"beam": 1, "alpha": 0.0}), wanted)

    def continuations(
        self, model: TransformerModel, prompts: Tensor, steps: int, decode: DecodeSpec, wanted: Wanted, use_cache: bool = True
    ) -> list[list[int]]:
        return beam_continuations(model, prompts, steps=steps, eos_id=wanted.eos_id, rules=wanted.rules, use_cache=use_cache)


@dataclass(frozen=True)
class Sampled(Strategy):
    """`n` samples of each source, scored as a beam's hypotheses are, sorted by score.

    :param sampling: how each token is drawn"""

    sampling: Sampling = Sampling()
    draws = True

    def hypotheses(self, model: TransformerModel, src: Tensor, decode: DecodeSpec, wanted: Wanted) -> list[list[Hypothesis]]:
        return sample_hypotheses(
            model,
            src,
            bos_id=wanted.bos_id,
            eos_id=wanted.eos_id,
            n=wanted.n,
            sampling=self.sampling,
            generator=wanted.generator,
            rules=wanted.rules,
            **limits(decode),
        )

    def continuations(
        self, model: TransformerModel, prompts: Tensor, steps: int, decode: DecodeSpec, wanted: Wanted, use_cache: bool = True
    ) -> list[list[int]]:
        return sampled_continuations(
            model,
            prompts,
            steps=steps,
            eos_id=wanted.eos_id,
            sampling=self.sampling,
            generator=wanted.generator,
            rules=wanted.rules,
            use_cache=use_cache,
        )


def limits(decode: DecodeSpec) -> dict[str, Any]:
    """The decode settings every strategy's output obeys and is scored by: its length limits and length penalty."""
    return {
        "max_len_a": decode.max_len_a,
        "max_len_b": decode.max_len_b,
        "alpha": decode.alpha,
        "length_penalty": decode.length_penalty,
    }


@dataclass(frozen=True)
class Decoding:
    """What a translate call asks for, as one value (frozen: `dataclasses.replace(decoding, seed=2)` is another).

    :param strategy: what finds each line's candidates (None: the one the run's decode.strategy names)
    :param n_best: the candidates a line (within the strategy's `n_best_limit`)
    :param unique: each text once in a line's list (fewer may stay)
    :param mbr: the minimum-Bayes-risk choice among them (None: all of them, best first)
    :param seed: the seed of whatever draws (the strategy, MBR's pseudo-references)"""

    strategy: Strategy | None = None  # None: the one the run's decode.strategy names
    n_best: int = 1
    unique: bool = False
    mbr: MBRChoice | None = None
    seed: int = 1

    def resolved(self, settings: DecodeSpec, registry: Registry) -> Decoding:
        """This decoding with a strategy: its own, or the one `settings.strategy` (decode.strategy) names."""
        if self.strategy is not None:
            return self
        return replace(self, strategy=strategy_of(settings.strategy, registry))

    def references(self) -> Strategy:
        """What draws MBR's pseudo-references apart from the candidates: the strategy where it draws, else sampling."""
        return self.strategy if self.strategy is not None and self.strategy.draws else Sampled()


def strategy_of(given: object, registry: Registry, name: str = "strategy") -> Strategy:
    """The Strategy a registered strategy's spec builds: a spec as YAML writes it ({"type": "sampling", "top_p": 0.9},
    or "beam" for its defaults), a spec object validated against `registry`, or a Strategy (itself). A UserError names
    what is wrong."""
    if isinstance(given, Strategy):
        return given
    if isinstance(given, StrategySpec):
        spec = given
    else:
        item = {"type": given} if isinstance(given, str) else given
        if not isinstance(item, dict):
            raise UserError(f"{name}: expected a decoding strategy ({{type: ..., ...}}), got {described(given)}")
        try:
            spec = TypeAdapter(AnyStrategy).validate_python(item, context=registry.context)
        except ValidationError as e:
            raise UserError(f"{name}: {spec_error(e, item)} (strategies: {', '.join(registry.classes('strategy'))})") from None
    made = registry.registration(spec).build(spec)
    if not isinstance(made, Strategy):
        raise UserError(f"{name}: the registration of {spec.type!r} built {type(made).__name__}, not an aiayn Strategy")
    return made


def generation_strategy(greedy: object, given: object, shaping: dict[str, Any], registry: Registry) -> Strategy:
    """The Strategy a generate call asks for (the Python API's names): `greedy`, or `given` (a Strategy, or a spec
    as strategy_of reads it), or sampling shaped by `shaping` (temperature, top_k, top_p, epsilon, filters: each at
    its default where not given); a UserError where two say how to generate."""
    greedy = bool_argument(greedy, "greedy")
    defaults = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "epsilon": 0.0, "filters": None}
    shaped = next(
        (name for name, value in shaping.items() if (bool(value) if name == "filters" else value != defaults[name])), None
    )
    if greedy and shaped is not None:
        shapes = "they shape" if shaped == "filters" else "it shapes"
        raise UserError(f"{shaped}: {shapes} sampling, and greedy takes the most probable token: give one or the other")
    if given is not None and (greedy or shaped is not None):
        raise UserError(f"strategy: it says how to generate, and so does {'greedy' if greedy else shaped}; give one of them")
    if greedy:
        return Greedy()
    if given is not None:
        return strategy_of(given, registry)
    made = filters_of(shaping.get("filters"), registry)
    return Sampled(sampling_from(**{name: shaping.get(name, defaults[name]) for name in SHAPED}, filters=made))


def check_n_best(n_best: object, beam: int | None, name: str, beam_name: str) -> int:
    """`n_best` (None: 1) as a count within the beam (None: no beam, any count), or a UserError in the words of `name`."""
    if n_best is None:
        return 1
    if not isinstance(n_best, int) or isinstance(n_best, bool) or n_best < 1:
        raise UserError(f"{name}: expected a whole number >= 1, got {described(n_best)}")
    if beam is not None and n_best > beam:
        raise UserError(
            f"{name} ({n_best}) is more than the beam size ({beam}): a search keeps {beam} hypotheses a sentence; "
            f"raise {beam_name} to at least {n_best}"
        )
    return n_best


def unique_texts(found: list[list[Hypothesis]], texts: list[list[str]]) -> tuple[list[list[Hypothesis]], list[list[str]]]:
    """Each line's hypotheses with each text once: the first, the best (they come best first),
    where two token sequences (two segmentations, say) give one string."""
    kept = [[i for i, t in enumerate(group) if t not in group[:i]] for group in texts]
    return [[hyps[i] for i in keep] for hyps, keep in zip(found, kept)], [
        [group[i] for i in keep] for group, keep in zip(texts, kept)
    ]

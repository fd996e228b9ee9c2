"""Sampling instead of search: each next token drawn from the model's distribution.

`Sampling` says how a token is drawn: from the softmax of the scores / temperature, kept to the
top_k most probable (Fan et al. 2018), then to the smallest set whose probability reaches top_p
(nucleus, Holtzman et al. 2020), then to the tokens whose probability is at least epsilon
(Hewitt et al. 2022), renormalised after each filter, in transformers' order of its warpers
(temperature, top-k, top-p, epsilon), then to what each of `filters` leaves (a plugin's, the
`sampling_filter` slot: `filters_of` builds them from their specs); the most probable token
always stays.

`sample_hypotheses` draws `n` outputs of each source (ancestral sampling: fairseq's --sampling,
Marian's --output-sampling), with the search's token rules and length limits. Each sample's
`log_prob` is log P(Y | X) under the model as the search reads it (the rules applied; no
temperature, no filter), its `score` log_prob / lp(|Y|), as a beam hypothesis's: samples of one
source come back sorted by score (the same output drawn twice is there twice). The draws come
from `generator`: the same seed, the same samples, on the same device and batches (on the CPU
here; a GPU's kernels may differ in their last bits, and a draw with them).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from pydantic import TypeAdapter, ValidationError
from torch import Tensor

from aiayn.blocks import TransformerModel
from aiayn.builder.decode.loop import Chooser, Next, Step, TokenRules, continue_prompts, decode_sources, strip_eos
from aiayn.builder.decode.search import Hypothesis, penalty_of
from aiayn.builder.errors import UserError, bool_argument, described
from aiayn.builder.registry import Registry
from aiayn.schemas.slots import AnySamplingFilter

FLOAT32_SMALLEST = 1.401298464324817e-45  # the smallest float32 above 0 (a subnormal one): a temperature's least
Filter = Callable[[Tensor], Tensor]  # logits (n, V) -> logits (n, V), -inf where a token is removed


@dataclass(frozen=True)
class Sampling:
    """How the next token is drawn from the filtered distribution (see the module's text; the most
    probable token is the `greedy` strategy's, strategy.py).

    :param temperature: divide the logits by it (> 0)
    :param top_k: draw among the k most probable tokens (>= 0; 0: all)
    :param top_p: then among the fewest whose probability reaches p (in (0, 1]; 1: all)
    :param epsilon: then among those of probability >= epsilon (in [0, 1); 0: all)
    :param filters: a plugin's filters after those, in order (functions logits -> logits; `filters_of` builds them)"""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    epsilon: float = 0.0
    filters: tuple[Filter, ...] = ()  # a plugin's, after aiayn's own, in order

    def __post_init__(self) -> None:
        if not self.temperature > 0 or not math.isfinite(self.temperature):
            raise ValueError(f"temperature ({self.temperature}) must be > 0; for the most probable token take greedy")
        if float(torch.tensor(self.temperature, dtype=torch.float32)) == 0:  # the logits are divided in float32
            raise ValueError(
                f"temperature ({self.temperature}) is 0 in float32, which the logits are divided in: give "
                f"{FLOAT32_SMALLEST:.2g} or more; for the most probable token take greedy"
            )
        if self.top_k < 0:
            raise ValueError(f"top_k ({self.top_k}) must be >= 0 (0: no limit)")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p ({self.top_p}) must be in (0, 1]")
        if not 0 <= self.epsilon < 1:
            raise ValueError(f"epsilon ({self.epsilon}) must be in [0, 1) (0: no limit)")

    def choose(self, logits: Tensor, generator: torch.Generator | list[torch.Generator] | None) -> Tensor:
        """(n,) next tokens from logits (n, V) (or log-probabilities: the same distribution), drawn
        from `generator`, or each row from its own (a list of n)."""
        probs = self.probabilities(logits)
        if isinstance(generator, list):
            return torch.cat([torch.multinomial(p[None], 1, generator=g) for p, g in zip(probs, generator)]).squeeze(1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(1)

    def probabilities(self, logits: Tensor) -> Tensor:
        """(n, V) the distribution a token is drawn from: tempered, filtered, renormalised."""
        logits = logits.float()
        # the highest first: a temperature of 1e-39 makes the others -inf, never inf - inf (NaN)
        logits = (logits - logits.max(dim=-1, keepdim=True).values.nan_to_num(neginf=0.0)) / self.temperature
        if self.top_k and self.top_k < logits.size(-1):
            kth = logits.topk(self.top_k, dim=-1).values[:, -1:]  # (n, 1)
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = logits.softmax(-1)
        if self.top_p < 1.0:
            sorted_probs, order = probs.sort(dim=-1, descending=True)
            before = sorted_probs.cumsum(-1) - sorted_probs  # the mass of the tokens ranked above each
            sorted_probs = sorted_probs.masked_fill(before >= self.top_p, 0.0)  # keep the smallest set reaching top_p
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
            probs = probs / probs.sum(-1, keepdim=True)
        if self.epsilon > 0:
            best = probs.argmax(-1, keepdim=True)
            low = probs < self.epsilon
            probs = probs.masked_fill(low.scatter(-1, best, False), 0.0)  # the most probable token stays
        probs = probs / probs.sum(-1, keepdim=True)
        if self.filters:
            logits = probs.log()  # the filters' input: logits of what aiayn's own filters left (-inf: removed)
            for keep in self.filters:
                logits = keep(logits)
            probs = logits.softmax(-1)
        return probs


def sampling_from(
    *,
    temperature: object = 1.0,
    top_k: object = 0,
    top_p: object = 1.0,
    epsilon: object = 0.0,
    filters: tuple[Filter, ...] = (),
) -> Sampling:
    """The settings as a Sampling, or a UserError naming the one that is wrong (its Python name)."""
    for name, value in (("temperature", temperature), ("top_p", top_p), ("epsilon", epsilon)):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise UserError(f"{name}: expected a number, got {described(value)}")
    if not isinstance(top_k, int) or isinstance(top_k, bool):
        raise UserError(f"top_k: expected a whole number, got {described(top_k)}")
    try:
        return Sampling(float(temperature), top_k, float(top_p), float(epsilon), filters)  # type: ignore[arg-type]
    except ValueError as e:
        raise UserError(str(e)) from None


def filters_of(given: object, registry: Registry, name: str = "filters") -> tuple[Filter, ...]:
    """The sampling filters `given` names, in order, each built by its registration: a list of specs
    as YAML writes them ({"type": "min_p", "min_p": 0.1}, or "min_p" for its defaults), or of
    registered spec objects; None or [] is none. A UserError names the one that is wrong."""
    if given is None:
        return ()
    if not isinstance(given, (list, tuple)):
        raise UserError(f"{name}: expected a list of sampling filters ({{type: ..., ...}}), got {described(given)}")
    known = ", ".join(registry.classes("sampling_filter"))
    if given and not known:
        raise UserError(f"{name}[0]: no sampling filter is registered: a plugin registers one (examples/plugin's min_p)")
    adapter: TypeAdapter[Any] = TypeAdapter(AnySamplingFilter)
    made = []
    for i, item in enumerate(given):
        item = {"type": item} if isinstance(item, str) else item
        try:
            spec = adapter.validate_python(item, context=registry.context)
        except ValidationError as e:
            raise UserError(f"{name}[{i}]: {spec_error(e, item)} (sampling filters: {known})") from None
        made.append(registry.registration(spec).build(spec))
    return tuple(made)


def spec_error(error: ValidationError, item: object) -> str:
    """The first of a registered spec's validation errors, as `field: message` (the field inside the spec)."""
    first = error.errors()[0]
    parts = [str(part) for part in first["loc"] if not isinstance(part, int)]
    where = ".".join(parts[1:] if parts[:1] == [str(spec_type(item))] else parts)  # the type's tag leads
    return f"{where + ': ' if where else ''}{first['msg'].removeprefix('Value error, ')}"


def spec_type(item: object) -> object:
    """The `type` a spec given as YAML names (None for anything else)."""
    return item.get("type") if isinstance(item, dict) else None


MAX_SEED = 2**63 - 1


def seed_argument(seed: object, name: str = "seed") -> int:
    """A sampler's seed: a whole number from 0 to 2**63 - 1 (what torch.Generator takes), or a UserError naming `name`."""
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
        raise UserError(f"{name}: expected a whole number from 0 to 2**63 - 1, got {described(seed)}")
    return seed


class Draws(Chooser):
    """Sampling as the loop's chooser: each row draws its next token with `sampling`, from
    `generator` (one for all rows, or a list: row r's own, r its index at the start); a row ends
    at EOS or its limit, as a Hypothesis scored by log P(Y | X) / lp(|Y|). `found[r]` is row r's."""

    def __init__(
        self,
        n: int,
        *,
        sampling: Sampling,
        eos_id: int,
        generator: torch.Generator | list[torch.Generator] | None = None,
        alpha: float = 0.0,
        length_penalty: str = "gnmt",
        device: torch.device,
    ) -> None:
        self.sampling, self.eos_id, self.generator = sampling, eos_id, generator
        self.alpha, self.lp = alpha, penalty_of(length_penalty)
        self.row = torch.arange(n, device=device)  # each live row's index at the start
        self.log_prob = torch.zeros(n, dtype=torch.float64, device=device)
        self.found: list[Hypothesis | None] = [None] * n

    def choose(self, at: Step) -> Next:
        log_probs, tokens, max_len, step = at.log_probs, at.tokens, at.max_len, at.index
        generator = self.generator
        if isinstance(generator, list):
            generator = [generator[r] for r in self.row.tolist()]
        token = self.sampling.choose(log_probs, generator)  # (m,)
        self.log_prob += log_probs.gather(1, token[:, None]).squeeze(1).double()
        ended = token.eq(self.eos_id)
        done = ended | max_len.le(step)
        if not bool(done.any()):
            return Next(token)
        for r in done.nonzero().flatten().tolist():
            total, ids = float(self.log_prob[r]), [*tokens[r, 1:].tolist(), int(token[r])]
            score = total / float(self.lp(step, self.alpha))
            self.found[int(self.row[r])] = Hypothesis(strip_eos(ids, self.eos_id), score, total, bool(ended[r]))
        keep = (~done).nonzero().flatten()
        self.row, self.log_prob = self.row[keep], self.log_prob[keep]
        return Next(token[keep], keep, keep)


def sampled_continuations(
    model: TransformerModel,
    prompts: Tensor,
    *,
    steps: int,
    eos_id: int,
    sampling: Sampling,
    generator: torch.Generator | list[torch.Generator] | None = None,
    rules: TokenRules = TokenRules(),
    use_cache: bool = True,
) -> list[list[int]]:
    """A continuation drawn after each prompt of prompts (B, L), without </s>; `generator`: one for
    all, or each prompt's own."""
    draws = Draws(prompts.size(0), sampling=sampling, eos_id=eos_id, generator=generator, device=prompts.device)
    continue_prompts(model, prompts, draws, copies=1, steps=steps, eos_id=eos_id, rules=rules, use_cache=use_cache)
    return [[] if h is None else h.ids for h in draws.found]


def sample_hypotheses(
    model: TransformerModel,
    src: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    n: int,
    sampling: Sampling,
    generator: torch.Generator | list[torch.Generator] | None = None,
    max_len_a: float = 1.0,
    max_len_b: int = 50,
    alpha: float = 0.6,
    length_penalty: str = "gnmt",
    rules: TokenRules = TokenRules(),
    use_cache: bool = True,
) -> list[list[Hypothesis]]:
    """`n` samples of each sentence of src (B, S), sorted by score (see the module's text)."""
    if n < 1:
        raise ValueError(f"n ({n}) must be >= 1")
    draws = Draws(
        src.size(0) * n,
        sampling=sampling,
        eos_id=eos_id,
        generator=generator,
        alpha=alpha,
        length_penalty=length_penalty,
        device=src.device,
    )
    decode_sources(
        model,
        src,
        draws,
        copies=n,
        bos_id=bos_id,
        eos_id=eos_id,
        max_len_a=max_len_a,
        max_len_b=max_len_b,
        rules=rules,
        use_cache=use_cache,
    )
    samples = [h for h in draws.found if h is not None]
    return [sorted(samples[i * n : (i + 1) * n], key=lambda h: -h.score) for i in range(src.size(0))]


# how the Python API names the settings in messages; the CLI hands its flags instead (cli/choice.py)
PYTHON_NAMES = {"sampling": "sampling=True", "n_best": "n_best", "mbr": "mbr", "beam": "beam"}


def check_sampling(sampling: bool, shaping: Sequence[str], beam: bool, names: Mapping[str, str] = PYTHON_NAMES) -> None:
    """What goes with sampling, the one place the CLI and the Python API check it: a setting that
    shapes sampling (`shaping`: those given) needs it, and a beam does not go with it; `names`: how
    the caller names each setting."""
    if shaping and not sampling:
        raise UserError(f"{names.get(shaping[0], shaping[0])}: it shapes sampling; give {names['sampling']}, or drop it")
    if sampling and beam:
        raise UserError(
            f"{names['beam']}: sampling draws each token and keeps no beam; give {names['beam']} or {names['sampling']}, not both"
        )


def sampler_of(sampling: object, settings: dict[str, Any], decode: dict[str, Any], registry: Registry) -> Sampling | None:
    """The sampling settings checked (None: beam search); each one given without `sampling` is refused;
    `filters` (a plugin's, by spec) built from `registry`."""
    sampling = bool_argument(sampling, "sampling")
    given = {name: value for name, value in settings.items() if value is not None and value != []}
    check_sampling(sampling, list(given), "beam" in decode)
    if "filters" in given:
        given["filters"] = filters_of(given["filters"], registry)
    return sampling_from(**given) if sampling else None

"""A trained model's weights into another (init_from, schemas/init_from.py). Exact by default:
every parameter by name and shape. What may differ is what `convert` names, each by its formula
(a Conversion of CONVERSIONS: a rule that finds what it converts, not a branch on key strings),
and what it did is listed; nothing is skipped silently.

  kv_heads    an attention with fewer K/V heads than the source's: head j of K (and of V) is the
              mean of the source's heads j*g .. (j+1)*g - 1, g = source K/V heads / this model's,
              the heads whose query heads it serves (Ainslie et al. 2023, sec. 2.1); Q and W^O as
              they were
  layers      a stack with fewer or more layers: its first layers are the source's, the rest
              initialised as usual
  new_blocks  a parameter the source has not: initialised as usual
"""

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from aiayn.blocks import MultiHeadAttention
from aiayn.builder.errors import UserError

STACKS = ("encoder", "decoder")
_LAYER = re.compile(r"^(encoder|decoder)\.layers\.(\d+)\.")
SHOWN = 5  # differences a refusal lists before it counts the rest


@dataclass
class Transferred:
    """What init_from did: tensors copied as they were, attentions pooled, parameters initialised."""

    copied: int = 0
    pooled: list[str] = field(default_factory=list)  # "decoder.layers.0.sublayers.0.sublayer: 8 -> 2 K/V heads"
    new: list[str] = field(default_factory=list)  # modules (or layers) initialised as usual
    dropped: list[str] = field(default_factory=list)  # the source's layers beyond this model's

    def record(self) -> dict[str, Any]:
        return {
            "copied": self.copied,
            **{k: v for k, v in (("pooled", self.pooled), ("new", self.new), ("dropped", self.dropped)) if v},
        }


def mean_pool_heads(t: Tensor, heads: int, into: int) -> Tensor:
    """(heads * d, ...) -> (into * d, ...): each of `into` consecutive groups of heads averaged."""
    d = t.shape[0] // heads
    return t.reshape(into, heads // into, d, *t.shape[1:]).mean(1).reshape(into * d, *t.shape[1:])


def transfer_weights(target: nn.Module, source: nn.Module, convert: Collection[str], *, where: str) -> Transferred:
    """Loads `source`'s weights into `target` as `convert` allows; a difference it does not allow,
    or a conversion that nothing needs, is one UserError naming it. Each conversion of CONVERSIONS
    finds what it would convert (the refusal's lines where it is not named) and marks the tensors
    it accounts for; every other tensor must match by name and shape."""
    plan, problems = _Plan(target.state_dict(), source.state_dict()), []
    for conversion in CONVERSIONS:
        found = conversion.find(target, source, plan)
        if found and conversion.name not in convert:
            problems += found
        _needed(conversion.name, convert, bool(found), conversion.otherwise)
    problems += _mismatches(plan) + _ties(plan.tgt, plan.src)
    _refuse(problems, where)

    tgt, src = plan.tgt, plan.src
    target.load_state_dict({k: (src[k] if k in src and src[k].shape == v.shape else v) for k, v in tgt.items()}, strict=True)
    plan.done.copied = sum(1 for k, v in tgt.items() if k not in plan.filled and k in src and src[k].shape == v.shape)
    for step in plan.after:
        step()
    return plan.done


@dataclass
class _Plan:
    """Two state dicts and what the conversions found: the target's tensors they fill (not matched
    by name), the source's they leave out, what they did, and what they do once the rest is loaded."""

    tgt: dict[str, Tensor]
    src: dict[str, Tensor]
    filled: set[str] = field(default_factory=set)
    left_out: set[str] = field(default_factory=set)
    done: Transferred = field(default_factory=Transferred)
    after: list[Callable[[], None]] = field(default_factory=list)


@dataclass(frozen=True)
class Conversion:
    """One of init_from.convert's: `find(target, source, plan)` -> the lines a refusal gives where
    it is needed and not named (none: nothing needs it); `otherwise`: what then holds."""

    name: str
    otherwise: str
    find: Callable[[nn.Module, nn.Module, _Plan], list[str]]


def _layers(target: nn.Module, source: nn.Module, plan: _Plan) -> list[str]:
    """Stacks of other depths: the first layers the source's, the rest new (or dropped)."""
    depths = {side: (_depth(source, side), _depth(target, side)) for side in STACKS}
    counts = {side: (s, t) for side, (s, t) in depths.items() if s is not None and t is not None}  # stacks both have
    plan.filled |= {k for k in plan.tgt if _beyond(k, {side: n[0] for side, n in counts.items()})}
    plan.left_out |= {k for k in plan.src if _beyond(k, {side: n[1] for side, n in counts.items()})}
    differ = {side: n for side, n in counts.items() if n[0] != n[1]}
    plan.done.new += [f"{side}.layers.{i}" for side, (s, t) in differ.items() for i in range(s, t)]
    plan.done.dropped += [f"{side}.layers.{i}" for side, (s, t) in differ.items() for i in range(t, s)]
    return [
        f"{side} has {n[1]} layer{'s' if n[1] > 1 else ''} and the source {n[0]}: add layers to init_from.convert to start from its "
        f"first {min(n)} ({'the rest initialised as usual' if n[1] > n[0] else 'the others dropped'})"
        for side, n in differ.items()
    ]


def _kv_heads(target: nn.Module, source: nn.Module, plan: _Plan) -> list[str]:
    """Attentions with fewer K/V heads: their projections filled by mean-pooling the source's."""
    pooled = _kv_changes(target, source, exclude=plan.filled)
    plan.filled |= {
        k
        for k in plan.tgt
        if k.startswith(
            tuple(f"{name}.{child}." for name, t, _ in pooled for child, m in t.named_children() if isinstance(m, nn.Linear))
        )
    }
    plan.after.append(lambda: plan.done.pooled.extend(_pool_kv(pooled)))
    return [
        f"{name} has {t.kv_heads} K/V heads and the source {s.kv_heads}: add kv_heads to init_from.convert to "
        "mean-pool each group's (GQA uptraining)"
        for name, t, s in pooled
    ]


def _new_blocks(target: nn.Module, source: nn.Module, plan: _Plan) -> list[str]:
    """Parameters the source has not: initialised as usual."""
    missing = [k for k in plan.tgt if k not in plan.filled and k not in plan.src]
    plan.filled |= set(missing)
    plan.done.new += sorted({k.rsplit(".", 1)[0] for k in missing})
    return [f"{k}: not in the source (add new_blocks to init_from.convert to initialise it as usual)" for k in missing]


CONVERSIONS = (
    Conversion("layers", "both stacks have the source's numbers of layers", _layers),
    Conversion("kv_heads", "every attention has the source's number of K/V heads", _kv_heads),
    Conversion("new_blocks", "every parameter of this model is in the source", _new_blocks),
)


def _mismatches(plan: _Plan) -> list[str]:
    """What no conversion accounts for: a tensor of another shape, one the source has and this model has not."""
    shapes = [
        f"{k}: the source's {tuple(plan.src[k].shape)}, this model's {tuple(v.shape)}"
        for k, v in plan.tgt.items()
        if k not in plan.filled and plan.src[k].shape != v.shape
    ]
    return shapes + [f"{k}: in the source, not in this model" for k in plan.src if k not in plan.tgt and k not in plan.left_out]


def _depth(model: nn.Module, side: str) -> int | None:
    stack = getattr(model, side, None)
    return None if stack is None else len(stack.layers)


def _refuse(problems: list[str], where: str) -> None:
    """One UserError listing the first SHOWN differences, where there are any."""
    if not problems:
        return
    more = f"\n  and {len(problems) - SHOWN} more" if len(problems) > SHOWN else ""
    raise UserError(
        f"{where}: {len(problems)} difference{'s' if len(problems) > 1 else ''} between the source's weights and this "
        "model's (they must match by name and shape, or differ as init_from.convert allows):\n  "
        + "\n  ".join(problems[:SHOWN])
        + more
    )


@torch.no_grad()
def _pool_kv(pooled: list[tuple[str, Any, Any]]) -> list[str]:
    """Each (name, target attention, source attention): Q and O copied, each group of the source's
    K/V heads mean-pooled into one of the target's; what was done, a line each."""
    done = []
    for name, t, s in pooled:
        ours, theirs = t.projections(), s.projections()
        for part, (weight, bias) in ours.items():
            w, b = theirs[part]
            pool = part in ("k", "v")
            weight.copy_(mean_pool_heads(w, s.kv_heads, t.kv_heads) if pool else w)
            if bias is not None and b is not None:
                bias.copy_(mean_pool_heads(b, s.kv_heads, t.kv_heads) if pool else b)
        done.append(f"{name}: {s.kv_heads} -> {t.kv_heads} K/V heads")
    return done


def _ties(tgt: dict[str, Tensor], src: dict[str, Tensor]) -> list[str]:
    """Tensors this model ties (one storage under several names) that the source holds apart
    with other values: loading would keep one of them and drop the others."""
    tied: dict[tuple[int, tuple[int, ...]], list[str]] = {}
    for key, value in tgt.items():
        tied.setdefault((value.data_ptr(), tuple(value.shape)), []).append(key)
    found = []
    for names in tied.values():
        theirs = [src[k] for k in names if k in src and src[k].shape == tgt[k].shape]
        if len(theirs) > 1 and any(not torch.equal(theirs[0], t) for t in theirs[1:]):
            found.append(f"{' = '.join(names)}: one tensor in this model, different ones in the source (model.embedding.share)")
    return found


def _beyond(key: str, layers: dict[str, int]) -> bool:
    """Whether `key` is a parameter of a layer past the first layers[stack] of its stack."""
    found = _LAYER.match(key)
    return found is not None and found.group(1) in layers and int(found.group(2)) >= layers[found.group(1)]


def _kv_changes(target: nn.Module, source: nn.Module, *, exclude: set[str]) -> list[tuple[str, Any, Any]]:
    """(name, this model's attention, the source's) where their K/V heads differ; refuses what
    mean-pooling cannot make (more heads than the source's, a count that does not divide it,
    other sizes changed)."""
    found = []
    for name, t in target.named_modules():
        if not isinstance(t, MultiHeadAttention) or any(k.startswith(f"{name}.") for k in exclude):
            continue
        s = source.get_submodule(name) if _has(source, name) else None
        if not isinstance(s, MultiHeadAttention) or s.kv_heads == t.kv_heads:
            continue
        sizes, theirs = (t.h, t.d_k, t.d_v, _biased(t)), (s.h, s.d_k, s.d_v, _biased(s))
        if t.kv_heads > s.kv_heads or s.kv_heads % t.kv_heads or sizes != theirs:
            why = (
                f"h, d_k, d_v, bias {sizes} where the source has {theirs}"
                if sizes != theirs
                else f"{t.kv_heads} K/V heads from the source's {s.kv_heads}: mean-pooling makes fewer heads, a number that divides {s.kv_heads}"
            )
            raise UserError(f"init_from.convert: kv_heads cannot make {name} ({why})")
        found.append((name, t, s))
    return found


def _biased(attention: MultiHeadAttention) -> bool:
    return all(bias is not None for _, bias in attention.projections().values())


def _has(module: nn.Module, name: str) -> bool:
    try:
        module.get_submodule(name)
    except AttributeError:
        return False
    return True


def _needed(conversion: str, convert: Collection[str], needed: bool, otherwise: str) -> None:
    if conversion in convert and not needed:
        raise UserError(f"init_from.convert: {conversion} is named, but {otherwise}; drop it")

"""A trained model's weights into another (init_from, schemas/init_from.py). Exact by default:
every parameter by name and shape. What may differ is what `convert` names, each by its formula,
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
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from aiayn.blocks import MultiHeadAttention
from aiayn.builder.errors import UserError

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
    """Loads `source`'s weights into `target` as `convert` allows (an EncoderDecoder each); a
    difference it does not allow, or a conversion that nothing needs, is one UserError naming it."""
    tgt, src = target.state_dict(), source.state_dict()
    done, problems = Transferred(), []

    counts = {side: (len(getattr(source, side).layers), len(getattr(target, side).layers)) for side in ("encoder", "decoder")}
    differ = {side: n for side, n in counts.items() if n[0] != n[1]}
    new_layers = {k for k in tgt if _beyond(k, {s: n[0] for s, n in counts.items()})}
    dropped = {k for k in src if _beyond(k, {s: n[1] for s, n in counts.items()})}
    if differ and "layers" not in convert:
        problems += [f"{side} has {n[1]} layer{'s' if n[1] > 1 else ''} and the source {n[0]}: add layers to init_from.convert to start from its "
                     f"first {min(n)} ({'the rest initialised as usual' if n[1] > n[0] else 'the others dropped'})"
                     for side, n in differ.items()]  # fmt: skip
    _needed("layers", convert, bool(differ), "both stacks have the source's numbers of layers")
    done.new += [f"{side}.layers.{i}" for side, (s, t) in differ.items() for i in range(s, t)]
    done.dropped += [f"{side}.layers.{i}" for side, (s, t) in differ.items() for i in range(t, s)]

    pooled = _kv_changes(target, source, exclude=new_layers)
    if pooled and "kv_heads" not in convert:
        problems += [f"{name} has {t.kv_heads} K/V heads and the source {s.kv_heads}: add kv_heads to init_from.convert to "
                     "mean-pool each group's (GQA uptraining)" for name, t, s in pooled]  # fmt: skip
    _needed("kv_heads", convert, bool(pooled), "every attention has the source's number of K/V heads")
    projections = {f"{name}.{child}." for name, t, _ in pooled for child, m in t.named_children() if isinstance(m, nn.Linear)}

    missing, shapes = [], []
    for key, value in tgt.items():
        if key in new_layers or key.startswith(tuple(projections)):
            continue
        if key not in src:
            missing.append(key)
        elif src[key].shape != value.shape:
            shapes.append(f"{key}: the source's {tuple(src[key].shape)}, this model's {tuple(value.shape)}")
    unexpected = [k for k in src if k not in tgt and k not in dropped]
    if missing and "new_blocks" not in convert:
        problems += [f"{k}: not in the source (add new_blocks to init_from.convert to initialise it as usual)" for k in missing]
    _needed("new_blocks", convert, bool(missing), "every parameter of this model is in the source")
    problems += shapes + [f"{k}: in the source, not in this model" for k in unexpected] + _ties(tgt, src)
    _refuse(problems, where)

    merged = {k: (src[k] if k in src and src[k].shape == v.shape else v) for k, v in tgt.items()}
    target.load_state_dict(merged, strict=True)
    done.copied = sum(1 for k, v in tgt.items() if k in src and src[k].shape == v.shape and not k.startswith(tuple(projections)))
    done.pooled += _pool_kv(pooled)
    done.new += sorted({k.rsplit(".", 1)[0] for k in missing})
    return done


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
    return found is not None and int(found.group(2)) >= layers[found.group(1)]


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
            why = (f"h, d_k, d_v, bias {sizes} where the source has {theirs}" if sizes != theirs
                   else f"{t.kv_heads} K/V heads from the source's {s.kv_heads}: mean-pooling makes fewer heads, a number that divides {s.kv_heads}")  # fmt: skip
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

"""One registry from schema class to block: how to build it, and its closed-form cost.

Parameter counts are not written here: `size.py` counts the parameters of modules built on the
meta device, so they cannot drift from what `build` makes. FLOPs and the activation memory a
block keeps for backward cannot be read off a module, so each entry states them.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn

from aiayn.blocks import LearnedPositionalEmbedding, MultiHeadAttention, PositionwiseFeedForward, SinusoidalPositionalEncoding
from aiayn.schemas._base import Spec
from aiayn.schemas.attention import CausalSelfAttentionSpec, CrossAttentionSpec, SelfAttentionSpec
from aiayn.schemas.feed_forward import FeedForwardSpec
from aiayn.schemas.positional import LearnedSpec, SinusoidalSpec


@dataclass(frozen=True)
class Entry:
    build: Callable[[Any, int], nn.Module]  # (spec, d_model) -> module
    flops: Callable[[Any, int, int], float]  # (spec, d_model, context length L) -> forward FLOPs per token
    activations: Callable[[Any, int], int]  # (spec, d_model) -> values per token kept for backward


REGISTRY: dict[type[Spec], Entry] = {}

_ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU}


def entry(spec: Spec) -> Entry:
    try:
        return REGISTRY[type(spec)]
    except KeyError:
        raise TypeError(f"no builder registered for {type(spec).__name__}") from None


# ---- attention (Sec. 3.2.2) ----------------------------------------------------------------


def _build_attention(spec: SelfAttentionSpec | CausalSelfAttentionSpec | CrossAttentionSpec, d_model: int) -> nn.Module:
    return MultiHeadAttention(
        d_model=d_model, h=spec.h, d_k=spec.d_k, d_v=spec.d_v, bias=spec.bias,
        attn_dropout=spec.attn_dropout, kind=spec.kind,  # type: ignore[arg-type]
    )


def _attention_flops(spec: SelfAttentionSpec, d_model: int, length: int) -> float:
    keys = (length + 1) / 2 if isinstance(spec, CausalSelfAttentionSpec) else length
    projections = 2 * (d_model * spec.h * (2 * spec.d_k + spec.d_v) + spec.h * spec.d_v * d_model)
    scores_and_mix = 2 * spec.h * (spec.d_k + spec.d_v) * keys
    return projections + scores_and_mix


def _attention_activations(spec: SelfAttentionSpec, d_model: int) -> int:
    # Q, K, V and the heads' output (fused attention keeps no L x L scores); input and residual
    return spec.h * 2 * (spec.d_k + spec.d_v) + 4 * d_model


for _cls in (SelfAttentionSpec, CausalSelfAttentionSpec, CrossAttentionSpec):
    REGISTRY[_cls] = Entry(_build_attention, _attention_flops, _attention_activations)


# ---- feed-forward (Sec. 3.3) ---------------------------------------------------------------


def _build_feed_forward(spec: FeedForwardSpec, d_model: int) -> nn.Module:
    return PositionwiseFeedForward(
        d_model=d_model, d_ff=spec.d_ff, activation=_ACTIVATIONS[spec.activation](),
        activation_dropout=spec.activation_dropout, bias=spec.bias,
    )


REGISTRY[FeedForwardSpec] = Entry(
    _build_feed_forward,
    lambda spec, d, length: 4.0 * d * spec.d_ff,
    lambda spec, d: 2 * spec.d_ff + 4 * d,  # the inner layer before and after the activation
)


# ---- positions (Sec. 3.5, Table 3 row E), one per side -------------------------------------

REGISTRY[SinusoidalSpec] = Entry(
    lambda spec, d: SinusoidalPositionalEncoding(d_model=d, layout=spec.layout),
    lambda spec, d, length: 0.0,
    lambda spec, d: 0,
)
REGISTRY[LearnedSpec] = Entry(
    lambda spec, d: LearnedPositionalEmbedding(max_len=spec.max_len, d_model=d),
    lambda spec, d, length: 0.0,
    lambda spec, d: 0,
)

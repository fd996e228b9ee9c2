"""aiayn's own blocks, registered through `register` exactly as a plugin registers its own: the
entry point `aiayn` of group `aiayn.blocks` (pyproject.toml) names `register_builtins`."""

from torch import nn

from aiayn.blocks import LearnedPositionalEmbedding, MultiHeadAttention, PositionwiseFeedForward, SinusoidalPositionalEncoding
from aiayn.builder.model.registry import BuildContext, register
from aiayn.schemas.attention import CausalSelfAttentionSpec, CrossAttentionSpec, SelfAttentionSpec
from aiayn.schemas.feed_forward import FeedForwardSpec
from aiayn.schemas.norm import LayerNormSpec
from aiayn.schemas.positional import LearnedSpec, SinusoidalSpec

_ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU}
_Attention = SelfAttentionSpec | CausalSelfAttentionSpec | CrossAttentionSpec


def register_builtins() -> None:
    for attention in (SelfAttentionSpec, CausalSelfAttentionSpec, CrossAttentionSpec):
        register(attention, slot="sublayer", build=_attention, flops=_attention_flops, activations=_attention_activations)
    register(
        FeedForwardSpec, slot="sublayer", build=_feed_forward,
        flops=lambda spec, d, length: 4.0 * d * spec.d_ff,
        activations=lambda spec, d: 2 * spec.d_ff + 4 * d,  # the inner layer before and after the activation
    )  # fmt: skip
    register(LayerNormSpec, slot="norm", build=lambda spec, ctx: nn.LayerNorm(ctx.d_model, eps=spec.eps), label=lambda spec: "LayerNorm")
    register(SinusoidalSpec, slot="positional", build=lambda spec, ctx: SinusoidalPositionalEncoding(d_model=ctx.d_model, layout=spec.layout))
    register(LearnedSpec, slot="positional", build=lambda spec, ctx: LearnedPositionalEmbedding(max_len=spec.max_len, d_model=ctx.d_model))


# ---- attention (Sec. 3.2.2) ----------------------------------------------------------------


def _attention(spec: _Attention, ctx: BuildContext) -> nn.Module:
    return MultiHeadAttention(
        d_model=ctx.d_model, h=spec.h, d_k=spec.d_k, d_v=spec.d_v, bias=spec.bias,
        attn_dropout=spec.attn_dropout, kind=spec.kind,  # type: ignore[arg-type]
    )  # fmt: skip


def _attention_flops(spec: _Attention, d_model: int, length: int) -> float:
    keys = (length + 1) / 2 if spec.kind == "causal_self" else length
    projections = 2 * (d_model * spec.h * (2 * spec.d_k + spec.d_v) + spec.h * spec.d_v * d_model)
    scores_and_mix = 2 * spec.h * (spec.d_k + spec.d_v) * keys
    return projections + scores_and_mix


def _attention_activations(spec: _Attention, d_model: int) -> int:
    # Q, K, V and the heads' output (fused attention keeps no L x L scores); input and residual
    return spec.h * 2 * (spec.d_k + spec.d_v) + 4 * d_model


# ---- feed-forward (Sec. 3.3) ---------------------------------------------------------------


def _feed_forward(spec: FeedForwardSpec, ctx: BuildContext) -> nn.Module:
    return PositionwiseFeedForward(
        d_model=ctx.d_model, d_ff=spec.d_ff, activation=_ACTIVATIONS[spec.activation](),
        activation_dropout=spec.activation_dropout, bias=spec.bias,
    )  # fmt: skip

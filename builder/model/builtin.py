"""aiayn's own blocks, registered with `registry.add` exactly as a plugin registers its own: the
entry point `aiayn` of group `aiayn.blocks` (pyproject.toml) names `register_builtins(registry)`.

The paper's blocks (attention, feed-forward, LayerNorm, sinusoidal and learned positions) and
their successors: grouped-query attention, rotary embeddings and the score steps (softmax,
sigmoid; seams of the attention),
gated feed-forward (SwiGLU, GEGLU, ReGLU), RMSNorm, no absolute positions, and the biases a stack
shares (ALiBi, T5's relative bias, several summed)."""

from collections.abc import Callable

from torch import nn

from aiayn.blocks import (
    AlibiBias,
    GatedFeedForward,
    LearnedPositionalEmbedding,
    NoPositions,
    PositionwiseFeedForward,
    Sigmoid,
    SinusoidalPositionalEncoding,
    Softmax,
    SummedBias,
    T5RelativeBias,
)
from aiayn.builder.data.make_tokenizers import register_tokenizers
from aiayn.builder.data.mbr_utilities import register_utilities
from aiayn.builder.data.text_steps import register_text_steps
from aiayn.builder.errors import UserError
from aiayn.builder.model.attention import (
    attention_activations,
    attention_flops,
    build_attention,
    build_window_attention,
    window_flops,
)
from aiayn.builder.model.parts import BuildContext, build, registry_of
from aiayn.builder.model.sampling_filters import register_sampling_filters
from aiayn.builder.registry import RegistryBuilder
from aiayn.schemas.attention import CausalSelfAttentionSpec, CrossAttentionSpec, SelfAttentionSpec
from aiayn.schemas.feed_forward import FeedForwardSpec, GatedFeedForwardSpec
from aiayn.schemas.norm import LayerNormSpec, RMSNormSpec
from aiayn.schemas.positional import LearnedSpec, NoPositionsSpec, SinusoidalSpec
from aiayn.schemas.score import SigmoidSpec, SoftmaxSpec
from aiayn.schemas.sliding_window import SlidingWindowAttentionSpec
from aiayn.schemas.stack_bias import AlibiSpec, T5BiasSpec
from aiayn.schemas.sum_bias import SumBiasSpec

_ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "relu": nn.ReLU, "gelu": nn.GELU, "gelu_tanh": lambda: nn.GELU(approximate="tanh"), "silu": nn.SiLU,
}  # fmt: skip


def activation_of(name: str) -> nn.Module:
    """A new module of the named activation (relu, gelu, gelu_tanh, silu: the feed-forward's)."""
    return _ACTIVATIONS[name]()


def register_builtins(registry: RegistryBuilder) -> None:
    """aiayn's own types, slot by slot: the sublayers and scores, the data's and decoding's, the norms
    and positions, the stacks' biases."""
    _register_sublayers(registry)
    for others in (register_text_steps, register_tokenizers, register_utilities, register_sampling_filters):
        others(registry.add)  # the data's, decoding's: text steps, tokenizers, MBR utilities, sampling filters
    _register_norms_and_positions(registry)
    _register_biases(registry)


def _register_sublayers(registry: RegistryBuilder) -> None:
    for attention in (SelfAttentionSpec, CausalSelfAttentionSpec, CrossAttentionSpec):
        registry.add(attention, slot="sublayer", build=build_attention, flops=attention_flops, activations=attention_activations)
    registry.add(
        FeedForwardSpec,
        slot="sublayer",
        build=_feed_forward,
        flops=lambda spec, d, length: 4.0 * d * spec.d_ff,
        activations=lambda spec, d: 2 * spec.d_ff + 4 * d,  # the inner layer before and after the activation
    )
    registry.add(
        GatedFeedForwardSpec,
        slot="sublayer",
        build=_gated_feed_forward,
        label=lambda spec: f"gated_feed_forward ({spec.variant})",
        flops=lambda spec, d, length: 6.0 * d * spec.d_ff,  # three d x d_ff matrices
        activations=lambda spec, d: 4 * spec.d_ff + 4 * d,  # gate, up, act(gate), their product
    )
    registry.add(
        SlidingWindowAttentionSpec,
        slot="sublayer",
        build=build_window_attention,
        flops=window_flops,
        activations=attention_activations,
        label=lambda spec: f"sliding_window_attention (window {spec.window})",
    )
    registry.add(SoftmaxSpec, slot="score", build=lambda spec, ctx: Softmax(), label=lambda spec: "softmax")
    registry.add(SigmoidSpec, slot="score", build=lambda spec, ctx: Sigmoid(bias=spec.bias), label=_sigmoid_label)


def _register_norms_and_positions(registry: RegistryBuilder) -> None:
    registry.add(
        LayerNormSpec,
        slot="norm",
        build=lambda spec, ctx: nn.LayerNorm(ctx.d_model, eps=spec.eps),
        label=lambda spec: "LayerNorm",
    )
    registry.add(
        RMSNormSpec, slot="norm", build=lambda spec, ctx: nn.RMSNorm(ctx.d_model, eps=spec.eps), label=lambda spec: "RMSNorm"
    )
    registry.add(
        SinusoidalSpec,
        slot="positional",
        build=lambda spec, ctx: SinusoidalPositionalEncoding(d_model=ctx.d_model, layout=spec.layout),
    )
    registry.add(
        LearnedSpec,
        slot="positional",
        build=lambda spec, ctx: LearnedPositionalEmbedding(max_len=spec.max_len, d_model=ctx.d_model, first=spec.first),
    )
    registry.add(NoPositionsSpec, slot="positional", build=lambda spec, ctx: NoPositions(d_model=ctx.d_model))


def _register_biases(registry: RegistryBuilder) -> None:
    # a bias adds one number to each score: not counted, as the norms are not
    registry.add(AlibiSpec, slot="stack_bias", build=lambda spec, ctx: AlibiBias(h=_heads(ctx)), label=lambda spec: "ALiBi")
    registry.add(T5BiasSpec, slot="stack_bias", build=_t5_bias, label=lambda spec: "T5 relative bias")
    registry.add(
        SumBiasSpec,
        slot="stack_bias",
        build=lambda spec, ctx: SummedBias([build(b, ctx) for b in spec.biases]),
        flops=lambda spec, d, length: sum(registry_of(spec).registration(b).flops(b, d, length) for b in spec.biases),
        label=lambda spec: " + ".join(registry_of(spec).registration(b).label(b) for b in spec.biases),
    )


def _heads(ctx: BuildContext) -> int:
    if ctx.heads is None:
        raise UserError(f"model.{ctx.stack}.position_bias: the stack has no self-attention for its bias to act on")
    return ctx.heads


def _t5_bias(spec: T5BiasSpec, ctx: BuildContext) -> nn.Module:
    return T5RelativeBias(
        h=_heads(ctx), num_buckets=spec.num_buckets, max_distance=spec.max_distance, bidirectional=ctx.stack == "encoder"
    )


# ---- feed-forward (Sec. 3.3) and the gated ones --------------------------------------------


def _feed_forward(spec: FeedForwardSpec, ctx: BuildContext) -> nn.Module:
    return PositionwiseFeedForward(
        d_model=ctx.d_model,
        d_ff=spec.d_ff,
        activation=_ACTIVATIONS[spec.activation](),
        activation_dropout=spec.activation_dropout,
        bias=spec.bias,
    )


def _gated_feed_forward(spec: GatedFeedForwardSpec, ctx: BuildContext) -> nn.Module:
    return GatedFeedForward(
        d_model=ctx.d_model,
        d_ff=spec.d_ff,
        activation=_ACTIVATIONS[spec.activation](),
        activation_dropout=spec.activation_dropout,
        bias=spec.bias,
    )


def _sigmoid_label(spec: SigmoidSpec) -> str:
    return "sigmoid" if spec.bias is None else f"sigmoid (b={spec.bias:g})"

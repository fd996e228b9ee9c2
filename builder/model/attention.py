"""Attention specs -> blocks, and what they cost: the public pieces a new attention reuses (a
plugin's spec subclasses `AttentionSpec`; its builder calls `attention_parts` and adds its own
q/k modules; its cost functions add theirs to `attention_flops` and `attention_activations`)."""

from typing import Any, cast

from aiayn.blocks import CausalMask, CrossAttention, MultiHeadAttention, QKNorm, Rotary, ScoreStep, SelfAttention
from aiayn.builder.model.parts import BuildContext, build
from aiayn.schemas.attention import AttentionSpec
from aiayn.schemas.sliding_window import SlidingWindowAttentionSpec


def attention_parts(spec: AttentionSpec, ctx: BuildContext) -> dict[str, Any]:
    """The keyword arguments of SelfAttention / CrossAttention that an attention spec decides: its
    sizes, which positions a query reads (a causal mask, or none), its q/k modules in order
    (QK-norm, then rotary), and its score step.

    :param spec: the attention's spec (an AttentionSpec or a subclass)
    :param ctx: what the block's build receives (d_model, its stack's shared tables)
    :returns: {d_model, h, d_k, d_v, kv_heads, bias, attn_dropout, mask, qk, score}"""
    qk = [m for m in (QKNorm(d_k=spec.d_k) if spec.qk_norm else None, shared_rotary(spec, ctx)) if m is not None]
    return {
        "d_model": ctx.d_model,
        "h": spec.h,
        "d_k": spec.d_k,
        "d_v": spec.d_v,
        "kv_heads": spec.kv_heads,
        "bias": spec.bias,
        "attn_dropout": spec.attn_dropout,
        "mask": CausalMask() if spec.causal else None,
        "qk": qk,
        "score": score_step(spec, ctx),
    }


def score_step(spec: AttentionSpec, ctx: BuildContext) -> ScoreStep:
    """The attention's score step, built by its registration, capped at the attention's softcap."""
    step = cast(ScoreStep, build(spec.score, ctx))  # registry.build refuses any other module
    return step.capped(spec.softcap)


def build_attention(spec: AttentionSpec, ctx: BuildContext) -> MultiHeadAttention:
    """Where its keys come from is what the spec says it reads: the encoder's memory, or x."""
    return (CrossAttention if spec.reads_memory else SelfAttention)(**attention_parts(spec, ctx))


def shared_rotary(spec: AttentionSpec, ctx: BuildContext) -> Rotary | None:
    """The stack's rotary table for this attention's setting (one for every attention alike; it
    holds no parameters)."""
    return None if spec.rotary is None else ctx.plan.rotary_table(spec.d_k, spec.rotary)


def attention_flops(spec: AttentionSpec, d_model: int, length: float) -> float:
    """Forward FLOPs per token (2 per multiply-add): the projections, the scores and the mix over
    the keys a query reads, and rotary's turns.

    :param spec: the attention's spec
    :param d_model: the model's width
    :param length: the tokens of context (a causal query reads (length + 1) / 2 on average)"""
    keys = (length + 1) / 2 if spec.causal else length
    kv = spec.kv_heads or spec.h
    projections = 2 * (d_model * spec.h * spec.d_k + d_model * kv * (spec.d_k + spec.d_v) + spec.h * spec.d_v * d_model)
    scores_and_mix = 2 * spec.h * (spec.d_k + spec.d_v) * keys
    rotary = 3 * (spec.h + kv) * spec.rotary.dims(spec.d_k) if spec.rotary else 0  # x cos + rotated x sin
    qk_norm = 4 * (spec.h + kv) * spec.d_k if spec.qk_norm else 0  # squares, mean, scale, gain
    return projections + scores_and_mix + rotary + qk_norm


def attention_activations(spec: AttentionSpec, d_model: int) -> int:
    """Values per token kept for backward: Q, K, V and the heads' output (fused attention keeps no
    L x L scores); the input and the residual; QK-norm's normalised q and k.

    :param spec: the attention's spec
    :param d_model: the model's width"""
    kv = spec.kv_heads or spec.h
    qk_norm = (spec.h + kv) * spec.d_k if spec.qk_norm else 0
    return spec.h * spec.d_k + kv * (spec.d_k + spec.d_v) + spec.h * spec.d_v + 4 * d_model + qk_norm


def window_flops(spec: SlidingWindowAttentionSpec, d_model: int, length: int) -> float:
    """attention_flops with each query reading at most `window` keys: sum of min(i + 1, window) over
    the `length` positions, per position."""
    w = min(spec.window, length)
    keys = (w * (w + 1) / 2 + (length - w) * w) / length
    return attention_flops(spec, d_model, 2 * keys - 1)  # the causal formula reads (length + 1) / 2 keys: these


def build_window_attention(spec: SlidingWindowAttentionSpec, ctx: BuildContext) -> MultiHeadAttention:
    """A self-attention whose causal mask has the spec's window."""
    return SelfAttention(**{**attention_parts(spec, ctx), "mask": CausalMask(window=spec.window)})

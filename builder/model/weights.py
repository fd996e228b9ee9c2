"""aiayn's EncoderDecoder read into the plain tensors every exporter needs (target-neutral), and
such tensors written back into one (`load_transformer_weights`: a Marian model read in).

Exporters and importers never walk our modules themselves: `transformer_weights` reads each stack of a model
that formats/limits.py accepted (the paper's layout: attention sub-layers, then the feed-forward)
into per-layer attention, feed-forward and norm tensors. The blocks hand out their own tensors
(`projections()`: attention splits Q, K and V out of its fused projections, a gated feed-forward
its W and V), so a change of our blocks touches the block and this file.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn

from aiayn.blocks import AddNorm, EncoderDecoder, InputEmbedding, TransformerLayer, TransformerStack


@dataclass(frozen=True)
class Linear:
    weight: Tensor  # (out, in), as nn.Linear
    bias: Tensor | None


@dataclass(frozen=True)
class Norm:
    gamma: Tensor
    beta: Tensor | None  # None: RMSNorm


@dataclass(frozen=True)
class Attention:
    q: Linear
    k: Linear
    v: Linear
    o: Linear
    norm: Norm


@dataclass(frozen=True)
class FeedForward:
    w_1: Linear  # the activated projection
    w_2: Linear
    norm: Norm
    w_up: Linear | None = None  # a gated feed-forward's other projection (act(x W_1) * x W_up)


@dataclass(frozen=True)
class Layer:
    self_attention: Attention
    cross_attention: Attention | None  # decoder layers only
    ffn: FeedForward


@dataclass(frozen=True)
class Stack:
    embedding: Tensor  # (V, d_model), unscaled
    positions: Tensor  # (rows, d_model), added after scaling
    layers: list[Layer]
    final_norm: Norm | None


@dataclass(frozen=True)
class TransformerWeights:
    encoder: Stack
    decoder: Stack
    output: Linear  # the pre-softmax projection (V, d_model)


def transformer_weights(model: EncoderDecoder, position_rows: int) -> TransformerWeights:
    """The model's tensors (float32, detached, CPU); sinusoid tables get `position_rows` rows."""
    return TransformerWeights(
        encoder=_stack(model.src_embed, model.encoder, position_rows),
        decoder=_stack(model.tgt_embed, model.decoder, position_rows),
        output=Linear(_t(model.generator.weight), _maybe(model.generator.bias)),
    )


def position_table(positional: nn.Module, rows: int) -> Tensor:
    """(rows, d_model) of a table without end (sinusoids, in their own layout); a bounded table
    (learned) as it is."""
    bound = getattr(positional, "max_positions", None)
    return _t(positional(rows if bound is None else bound, 0))


def permuted(weights: TransformerWeights, perm: Tensor) -> TransformerWeights:
    """The same function with the d_model axis of the residual stream permuted by `perm`:
    h' = h[..., perm]. Exact: LayerNorm is permutation-equivariant, and every matrix that reads
    the stream has its columns, every one that writes it its rows (and bias), permuted alike."""

    def reads(lin: Linear) -> Linear:
        return Linear(lin.weight[:, perm], lin.bias)

    def writes(lin: Linear) -> Linear:
        return Linear(lin.weight[perm], None if lin.bias is None else lin.bias[perm])

    def norm(n: Norm) -> Norm:
        return Norm(n.gamma[perm], None if n.beta is None else n.beta[perm])

    def attention(a: Attention) -> Attention:
        return Attention(q=reads(a.q), k=reads(a.k), v=reads(a.v), o=writes(a.o), norm=norm(a.norm))

    def layer(lay: Layer) -> Layer:
        up = None if lay.ffn.w_up is None else reads(lay.ffn.w_up)
        ffn = FeedForward(w_1=reads(lay.ffn.w_1), w_2=writes(lay.ffn.w_2), norm=norm(lay.ffn.norm), w_up=up)
        cross = None if lay.cross_attention is None else attention(lay.cross_attention)
        return Layer(attention(lay.self_attention), cross, ffn)

    def stack(s: Stack) -> Stack:
        final = None if s.final_norm is None else norm(s.final_norm)
        return replace(
            s,
            embedding=s.embedding[:, perm],
            positions=s.positions[:, perm],
            layers=[layer(x) for x in s.layers],
            final_norm=final,
        )

    return TransformerWeights(stack(weights.encoder), stack(weights.decoder), reads(weights.output))


def interleaved_to_concatenated(d_model: int) -> Tensor:
    """perm with PE_interleaved[:, perm] == PE_concatenated: the sines (even columns), then the
    cosines (odd columns), frequency by frequency."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def _stack(embed: InputEmbedding, stack: TransformerStack, position_rows: int) -> Stack:
    layers = []
    for layer in stack.layers:
        assert isinstance(layer, TransformerLayer)
        *attention, ffn = [s for s in layer.sublayers if isinstance(s, AddNorm)]  # [self, (cross,) ffn]: as limits.py allows
        attentions = [_attention(s) for s in attention]
        layers.append(Layer(attentions[0], attentions[1] if len(attentions) > 1 else None, _ffn(ffn)))
    final = None if stack.final_norm is None else _norm(stack.final_norm)
    positions = position_table(embed.positional, position_rows)
    return Stack(embedding=_t(embed.token.table.weight), positions=positions, layers=layers, final_norm=final)


def _projections(sub: AddNorm) -> dict[str, Linear]:
    """The sub-layer's matrices as its `projections()` gives them (every exported block has it)."""
    projections = getattr(sub.sublayer, "projections")()
    return {name: Linear(_t(w), _maybe(b)) for name, (w, b) in projections.items()}


def _attention(sub: AddNorm) -> Attention:
    return Attention(**_projections(sub), norm=_norm(sub.norm))


def _ffn(sub: AddNorm) -> FeedForward:
    return FeedForward(**_projections(sub), norm=_norm(sub.norm))


def _norm(norm: nn.Module) -> Norm:
    """A LayerNorm's gamma and beta, or an RMSNorm's gamma (the norms limits.py lets through)."""
    weight = norm.weight
    assert isinstance(weight, Tensor)
    return Norm(_t(weight), _maybe(getattr(norm, "bias", None)))


def _t(x: Tensor) -> Tensor:
    return x.detach().to("cpu", torch.float32).contiguous()


def _maybe(x: Tensor | None) -> Tensor | None:
    return None if x is None else _t(x)


@torch.no_grad()
def load_transformer_weights(model: EncoderDecoder, weights: TransformerWeights) -> None:
    """The inverse of `transformer_weights`: `weights` copied into a model of the same layout (one
    that formats/limits.py accepts), through the blocks' own `projections()` views (fused Q/K/V
    included). Positions are computed (sinusoids), not copied: a model with a learned table is
    refused. A tied table is written once per name, alike."""
    for embed, stack, given in (
        (model.src_embed, model.encoder, weights.encoder),
        (model.tgt_embed, model.decoder, weights.decoder),
    ):
        if any(True for _ in embed.positional.parameters()):
            raise ValueError("load_transformer_weights: the model has learned positions, which the weights do not carry")
        embed.token.table.weight.copy_(given.embedding)
        for layer, ours in zip(stack.layers, given.layers, strict=True):
            assert isinstance(layer, TransformerLayer)
            *attention, ffn = [s for s in layer.sublayers if isinstance(s, AddNorm)]
            for sub, part in zip(
                attention, [ours.self_attention, *([ours.cross_attention] if ours.cross_attention else [])], strict=True
            ):
                _assign(sub, {"q": part.q, "k": part.k, "v": part.v, "o": part.o}, part.norm)
            _assign(
                ffn,
                {"w_1": ours.ffn.w_1, "w_2": ours.ffn.w_2, **({"w_up": ours.ffn.w_up} if ours.ffn.w_up else {})},
                ours.ffn.norm,
            )
        if stack.final_norm is not None and given.final_norm is not None:
            _assign_norm(stack.final_norm, given.final_norm)
    model.generator.weight.copy_(weights.output.weight)
    if model.generator.bias is not None and weights.output.bias is not None:
        model.generator.bias.copy_(weights.output.bias)


def _assign(sub: AddNorm, linears: dict[str, Linear], norm: Norm) -> None:
    views = getattr(sub.sublayer, "projections")()
    if set(views) != set(linears):
        raise ValueError(f"the block has projections {sorted(views)}, the weights {sorted(linears)}")
    for name, (weight, bias) in views.items():
        weight.copy_(linears[name].weight)
        if bias is not None:
            given = linears[name].bias
            bias.copy_(given if given is not None else torch.zeros_like(bias))
    _assign_norm(sub.norm, norm)


def _assign_norm(module: nn.Module, norm: Norm) -> None:
    weight, bias = module.weight, getattr(module, "bias", None)
    assert isinstance(weight, Tensor)
    weight.copy_(norm.gamma)
    if isinstance(bias, Tensor) and norm.beta is not None:
        bias.copy_(norm.beta)

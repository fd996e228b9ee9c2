"""The base of a sub-layer block: what a layer calls, and what the code that consumes blocks asks."""

from __future__ import annotations

from torch import Tensor, nn

from aiayn.blocks.context import LayerContext


class Sublayer(nn.Module):
    """A residual branch of a layer (Sec 3.1): forward(x, ctx) -> a tensor of x's shape.

    x is (B, T, d_model), or (n, d_model) when `ctx.packed` says it holds only n rows of a
    (B, T) sequence: a position-wise block need not care; one that mixes positions unpacks its
    projections with `ctx.packed.unpack` and packs its output. In the decoder, `ctx.state` asks
    for one step at a time (see DecoderState).

    Code that consumes blocks asks them, never tests their class:
      reads_memory    its keys and values come from `ctx.memory`, the encoder output
      attention_maps  it has `attention_weights(x, ctx)` -> (B, heads, T, S) for TensorBoard,
                      named `map_name` in the tags (valid/attention/decoder.layer0.cross)
    """

    reads_memory: bool = False
    attention_maps: bool = False

    @property
    def map_name(self) -> str:
        return type(self).__name__

    def forward(self, x: Tensor, ctx: LayerContext) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} must define forward(x, ctx)")

    def attention_weights(self, x: Tensor, ctx: LayerContext) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no attention maps (attention_maps is False)")

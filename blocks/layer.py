"""One encoder or decoder layer: residual sub-layers applied in order (Sec 3.1, Figure 1)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from aiayn.blocks.context import LayerContext


class TransformerLayer(nn.Module):
    """An ordered list of AddNorm-wrapped sub-layers (Sec 3.1).

    The encoder layer is [self-attention, feed-forward]; the decoder layer is
    [causal self-attention, cross-attention, feed-forward]. Post-norm (the paper), per sub-layer:

        x ─────────────┐
        │              │
        Sublayer(x, ctx)
        │              │
        Dropout        │
        │              │
        (+) <──────────┘
        │
        Norm (LayerNorm, the paper's)
        │
        x' ──> next sub-layer

    Pre-norm moves the norm onto the branch: x' = x + Dropout(Sublayer(Norm(x), ctx)).
    """

    def __init__(self, *, sublayers: Sequence[nn.Module]) -> None:
        super().__init__()
        if len(sublayers) == 0:
            raise ValueError("sublayers is empty: a layer needs at least one sub-layer")
        self.sublayers = nn.ModuleList(sublayers)

    def forward(self, x: Tensor, ctx: LayerContext) -> Tensor:
        for sublayer in self.sublayers:
            x = sublayer(x, ctx)  # (B, T, d_model)
        return x

"""Residual connection, dropout and normalisation around a sub-layer (Sec 3.1, 5.4)."""

from __future__ import annotations

from torch import Tensor, nn

from aiayn.blocks.context import LayerContext
from aiayn.blocks.dropout import Dropout


class AddNorm(nn.Module):
    """Post-norm (the paper): Norm(x + Dropout(Sublayer(x))) (Sec 3.1; dropout Sec 5.4).

    `norm` is the normaliser, built from its spec (nn.LayerNorm is the paper's). norm_first=True
    gives the pre-norm variant x + Dropout(Sublayer(Norm(x))); a stack of pre-norm layers then
    needs a final norm (see TransformerStack).
    """

    def __init__(self, *, sublayer: nn.Module, norm: nn.Module, dropout: float, norm_first: bool = False) -> None:
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout ({dropout}) must be in [0, 1)")
        self.sublayer = sublayer
        self.dropout = Dropout(dropout)
        self.norm = norm
        self.norm_first = norm_first

    def forward(self, x: Tensor, ctx: LayerContext) -> Tensor:
        if self.norm_first:
            return x + self.dropout(self.sublayer(self.norm(x), ctx))
        return self.norm(x + self.dropout(self.sublayer(x, ctx)))

    def extra_repr(self) -> str:
        return f"norm_first={self.norm_first}"

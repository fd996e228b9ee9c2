"""Residual connection, dropout and layer normalisation around a sub-layer (Sec 3.1, 5.4)."""

from __future__ import annotations

from torch import Tensor, nn

from aiayn.blocks.context import LayerContext
from aiayn.blocks.dropout import Dropout


class AddNorm(nn.Module):
    """Post-norm (the paper): LayerNorm(x + Dropout(Sublayer(x))) (Sec 3.1; dropout Sec 5.4).

    norm_first=True gives the pre-norm variant x + Dropout(Sublayer(LayerNorm(x))); a stack of
    pre-norm layers then needs a final LayerNorm (see TransformerStack).
    """

    def __init__(
        self,
        *,
        sublayer: nn.Module,
        d_model: int,
        dropout: float,
        eps: float,
        norm_first: bool = False,
    ) -> None:
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout ({dropout}) must be in [0, 1)")
        if eps <= 0:
            raise ValueError(f"eps ({eps}) must be > 0")
        self.sublayer = sublayer
        self.dropout = Dropout(dropout)
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.norm_first = norm_first

    def forward(self, x: Tensor, ctx: LayerContext) -> Tensor:
        if self.norm_first:
            return x + self.dropout(self.sublayer(self.norm(x), ctx))
        return self.norm(x + self.dropout(self.sublayer(x, ctx)))

    def extra_repr(self) -> str:
        return f"norm_first={self.norm_first}"

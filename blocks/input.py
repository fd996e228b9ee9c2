"""The input of either stack: token embedding plus positions, then dropout (Sec 3.4, 3.5, 5.4)."""

from __future__ import annotations

from torch import Tensor, nn

from aiayn.blocks.dropout import Dropout
from aiayn.blocks.embedding import ScaledEmbedding


class InputEmbedding(nn.Module):
    """Dropout(Embedding(tokens) * sqrt(d_model) + PE) (Sec 3.5; dropout on the sums, Sec 5.4).

    `positional` is any module with forward(length, offset) -> (length, d_model) on its device.
    `segment`: a table of segment (token type) embeddings added too (BERT's; a row's segment ids
    default to 0); `norm`: a norm of the sum before the dropout (BERT's LayerNorm).
    """

    def __init__(
        self,
        *,
        token: ScaledEmbedding,
        positional: nn.Module,
        dropout: float,
        segment: nn.Embedding | None = None,
        norm: nn.Module | None = None,
    ) -> None:
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout ({dropout}) must be in [0, 1)")
        self.token = token
        self.positional = positional
        self.segment, self.norm = segment, norm
        self.dropout = Dropout(dropout)

    def forward(self, tokens: Tensor, offset: int = 0, segments: Tensor | None = None) -> Tensor:
        x = self.token(tokens) + self.positional(tokens.size(1), offset)  # (B, T, d_model)
        if self.segment is not None:
            x = x + (self.segment.weight[0] if segments is None else self.segment(segments))
        if self.norm is not None:
            x = self.norm(x)
        return self.dropout(x)  # (B, T, d_model)

"""Token embeddings and the pre-softmax projection, optionally sharing one matrix (Sec 3.4)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class ScaledEmbedding(nn.Module):
    """Looks tokens up in `table` and multiplies by sqrt(d_model) when `scale` (Sec 3.4).

    The table is passed in so that one matrix can serve the source embedding, the target
    embedding and the output projection.
    """

    def __init__(self, *, table: nn.Embedding, scale: bool) -> None:
        super().__init__()
        self.table = table
        self.scale = scale
        self.multiplier = math.sqrt(table.embedding_dim) if scale else 1.0

    @property
    def d_model(self) -> int:
        return self.table.embedding_dim

    @property
    def vocab_size(self) -> int:
        return self.table.num_embeddings

    def forward(self, tokens: Tensor) -> Tensor:
        return self.table(tokens) * self.multiplier  # (B, T, d_model)

    def extra_repr(self) -> str:
        return f"scale={self.scale}"


class OutputProjection(nn.Module):
    """The pre-softmax linear transformation to vocabulary logits (Sec 3.4).

    With `tied_weight` (e.g. the embedding table's weight) it uses that very Parameter and owns
    no weight of its own, so the shared matrix is counted and updated once.
    """

    def __init__(
        self,
        *,
        d_model: int,
        vocab_size: int,
        bias: bool = False,
        tied_weight: nn.Parameter | None = None,
    ) -> None:
        super().__init__()
        if tied_weight is None:
            self.weight = nn.Parameter(torch.empty(vocab_size, d_model))
            nn.init.normal_(self.weight, mean=0.0, std=d_model**-0.5)
        elif tuple(tied_weight.shape) != (vocab_size, d_model):
            raise ValueError(
                f"tied_weight has shape {tuple(tied_weight.shape)} but the projection needs "
                f"(vocab_size, d_model) = ({vocab_size}, {d_model})"
            )
        else:
            self.weight = tied_weight  # the same Parameter object: sharing, not a copy
        self.tied = tied_weight is not None
        self.bias = nn.Parameter(torch.zeros(vocab_size)) if bias else None
        self.d_model, self.vocab_size = d_model, vocab_size

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)  # (B, T, V)

    def extra_repr(self) -> str:
        bias = self.bias is not None
        return f"d_model={self.d_model}, vocab_size={self.vocab_size}, tied={self.tied}, bias={bias}"

"""QK-norm: queries and keys normalised per head before their dot product (Henry et al. 2020,
"Query-Key Normalization for Transformers"; Dehghani et al. 2023, ViT-22B), as Qwen3 does it:
an RMSNorm over each head's d_k, one for the queries and one for the keys, handed to attention as
a q/k module. It bounds the logits' growth that destabilises training at scale."""

from __future__ import annotations

from torch import Tensor, nn


class QKNorm(nn.Module):
    """q (B, h, T, d_k), k (B, kv_heads, S, d_k) -> each RMS-normalised over d_k, with its own
    learned gain (2 * d_k parameters). Not positional: cross-attention may take it."""

    positional = False

    def __init__(self, *, d_k: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.q_norm, self.k_norm = nn.RMSNorm(d_k, eps=eps), nn.RMSNorm(d_k, eps=eps)

    def forward(self, q: Tensor, k: Tensor, offset: int) -> tuple[Tensor, Tensor]:
        return self.q_norm(q), self.k_norm(k)

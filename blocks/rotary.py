"""Rotary position embeddings (Su et al. 2021, "RoFormer"), a position transform for attention."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class Rotary(nn.Module):
    """q, k (B, heads, T, d_k) at positions offset .. offset + T - 1 -> the same with the first
    `dims` of each head rotated, as GPT-NeoX and LLaMA do (transformers' rotate_half): the pair
    (x_i, x_{i + dims/2}) turns by the angle position * base^(-2i/dims); dims d_k..d_k-1 pass.

    Relative: q_m . k_n after the rotation depends on m - n only. No parameters: the angles of
    the first `max_len` positions are a non-persistent float32 buffer, further ones computed.

    :param d_k: the width of a head
    :param dims: the leading dimensions of each head that turn (even, <= d_k)
    :param base: the base of the angles' frequencies (10,000: RoFormer's, Llama 2's)
    :param max_len: the positions whose angles are kept precomputed"""

    cos: Tensor  # (max_len, dims) buffers
    sin: Tensor

    positional = True  # it turns q and k by their positions: one sequence's (self-attention)

    def __init__(self, *, d_k: int, dims: int, base: float = 10000.0, max_len: int = 1024) -> None:
        super().__init__()
        if dims < 2 or dims % 2 or dims > d_k:
            raise ValueError(f"dims ({dims}) must be even, >= 2 and <= d_k ({d_k})")
        self.d_k, self.dims, self.base = d_k, dims, base
        cos, sin = self._angles(0, max_len)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, q: Tensor, k: Tensor, offset: int) -> tuple[Tensor, Tensor]:
        T = q.size(-2)
        if offset + T <= self.cos.size(0):
            cos, sin = self.cos[offset : offset + T], self.sin[offset : offset + T]  # (T, dims)
        else:
            cos, sin = self._angles(offset, offset + T, self.cos.device)
        return self._rotate(q, cos, sin), self._rotate(k, cos, sin)

    def _rotate(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        turned, rest = x[..., : self.dims], x[..., self.dims :]
        half = self.dims // 2
        rotated = torch.cat([-turned[..., half:], turned[..., :half]], dim=-1)  # rotate_half
        out = turned * cos.to(x.dtype) + rotated * sin.to(x.dtype)  # (..., T, dims)
        return out if rest.size(-1) == 0 else torch.cat([out, rest], dim=-1)

    def _angles(self, start: int, end: int, device: torch.device | None = None) -> tuple[Tensor, Tensor]:
        inverse = self.base ** -(torch.arange(0, self.dims, 2, dtype=torch.float64, device=device) / self.dims)  # (dims/2,)
        angles = torch.arange(start, end, dtype=torch.float64, device=device)[:, None] * inverse  # (n, dims/2)
        angles = torch.cat([angles, angles], dim=-1)  # (n, dims): pair i and i + dims/2 share an angle
        return angles.cos().float(), angles.sin().float()

    def extra_repr(self) -> str:
        return f"d_k={self.d_k}, dims={self.dims}, base={self.base:g}"

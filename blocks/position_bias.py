"""Score biases a stack shares among its self-attentions: ALiBi (Press et al. 2022) and T5's
relative position bias (Raffel et al. 2020), and several summed. Each is bias(T, S) -> (h, T, S)
for queries at the last T of S key positions (see TransformerStack and MultiHeadAttention)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def alibi_slopes(h: int) -> list[float]:
    """The paper's slopes: 2^(-8/h), 2^(-16/h), ... for h a power of 2; otherwise those of the
    power of 2 below h, then every other slope of the power above (its reference code)."""
    if h & (h - 1) == 0:
        return [2.0 ** (-8.0 * (i + 1) / h) for i in range(h)]
    below = 2 ** math.floor(math.log2(h))
    return alibi_slopes(below) + alibi_slopes(2 * below)[0::2][: h - below]


def _distances(T: int, S: int, device: torch.device) -> Tensor:
    """key position - query position (T, S), queries being the last T of S positions."""
    queries = torch.arange(S - T, S, device=device)[:, None]
    return torch.arange(S, device=device)[None, :] - queries


class AlibiBias(nn.Module):
    """-m_h * |i - j| for query i and key j: a causal query reads only keys before it, so this is
    the paper's bias there; a bidirectional one (the encoder's) is penalised alike on both sides.
    No parameters."""

    slopes: Tensor  # (h,) buffer

    def __init__(self, *, h: int) -> None:
        super().__init__()
        self.h = h
        self.register_buffer("slopes", torch.tensor(alibi_slopes(h)), persistent=False)

    def forward(self, T: int, S: int) -> Tensor:
        distance = _distances(T, S, self.slopes.device).abs().float()  # (T, S)
        return -self.slopes[:, None, None] * distance  # (h, T, S)

    def extra_repr(self) -> str:
        return f"h={self.h}"


def t5_bucket(relative: Tensor, *, bidirectional: bool, num_buckets: int, max_distance: int) -> Tensor:
    """T5's bucket of each relative position (key - query), as transformers' T5 computes it:
    half the buckets for each direction when bidirectional; within one, the first half exact,
    the rest logarithmic in the distance up to max_distance, the last bucket beyond."""
    buckets = torch.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative > 0).long() * num_buckets
        distance = relative.abs()
    else:
        distance = -torch.clamp(relative, max=0)  # past keys; future ones share bucket 0
    exact = num_buckets // 2
    is_small = distance < exact
    log_bucket = exact + (torch.log(distance.float() / exact) / math.log(max_distance / exact) * (num_buckets - exact)).long()
    log_bucket = torch.minimum(log_bucket, torch.full_like(log_bucket, num_buckets - 1))
    return buckets + torch.where(is_small, distance, log_bucket)


class T5RelativeBias(nn.Module):
    """One learned scalar per head and bucket of relative position: table (num_buckets, h)."""

    def __init__(self, *, h: int, num_buckets: int, max_distance: int, bidirectional: bool) -> None:
        super().__init__()
        self.h, self.num_buckets, self.max_distance, self.bidirectional = h, num_buckets, max_distance, bidirectional
        self.table = nn.Embedding(num_buckets, h)

    def forward(self, T: int, S: int) -> Tensor:
        relative = _distances(T, S, self.table.weight.device)
        buckets = t5_bucket(
            relative, bidirectional=self.bidirectional, num_buckets=self.num_buckets, max_distance=self.max_distance
        )
        return self.table(buckets).permute(2, 0, 1)  # (h, T, S)

    def extra_repr(self) -> str:
        return f"h={self.h}, num_buckets={self.num_buckets}, max_distance={self.max_distance}, bidirectional={self.bidirectional}"


class SummedBias(nn.Module):
    """The sum of several biases, each (h or 1, T, S); its parameters are theirs."""

    def __init__(self, biases: list[nn.Module]) -> None:
        super().__init__()
        self.biases = nn.ModuleList(biases)

    def forward(self, T: int, S: int) -> Tensor:
        total = self.biases[0](T, S)
        for bias in self.biases[1:]:
            total = total + bias(T, S)
        return total

"""What an attention's queries may read, as small value objects (after fairseq2's attention
biases): a causal mask, with or without a sliding window, composed with the keys' padding and
with score biases into what `scaled_dot_product_attention` takes, its fused causal kernels kept
where nothing else is added."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class CausalMask:
    """Query i reads the keys at positions <= i (the decoder's masked self-attention, Sec. 3.2.3);
    with `window`, only the last `window` of them (sliding-window attention, Beltagy et al.
    2020: a query reads itself and the window - 1 keys before it).

    :param window: how many of the latest keys a query reads, itself included (None: all before it)"""

    window: int | None = None

    def __post_init__(self) -> None:
        if self.window is not None and self.window < 1:
            raise ValueError(f"window ({self.window}) must be >= 1: a query reads at least itself")

    def fused(self, T: int, S: int) -> bool:
        """Whether SDPA's is_causal says exactly this (queries and keys the same positions, no window)."""
        return self.window is None and T == S

    def allowed(self, T: int, S: int, device: torch.device) -> Tensor:
        """(T, S) bool, True where the query may read the key; queries are the last T of S positions."""
        query = torch.arange(S - T, S, device=device)[:, None]  # (T, 1) absolute positions
        key = torch.arange(S, device=device)[None, :]  # (1, S)
        allowed = key <= query
        if self.window is not None:
            allowed = allowed & (key > query - self.window)
        return allowed


def attention_mask(
    causal: CausalMask | None,
    key_padding: Tensor | None,
    bias: Tensor | None,
    T: int,
    S: int,
    *,
    like: Tensor,
    prefix: Tensor | None = None,
) -> tuple[Tensor | None, bool]:
    """What SDPA adds to Q K^T / sqrt(d_k), broadcastable to (B, h, T, S), and its is_causal flag:
    (None, True) for a causal mask SDPA's fused kernels say alone; a boolean mask (True: may
    read) where there is no bias; else the bias in the queries' dtype, -inf where a key may not be
    read. `key_padding` (B, S) is True at padded keys; `bias` (h or 1, T, S); `prefix` (B,): each
    row's first prefix[b] keys are read by every query of a causal mask (a prefix LM's source)."""
    if causal is not None and causal.fused(T, S) and key_padding is None and bias is None and prefix is None:
        return None, True
    allowed = None if key_padding is None else ~key_padding[:, None, None, :]  # (B, 1, 1, S)
    if causal is not None and (T > 1 or causal.window is not None):
        tri = causal.allowed(T, S, like.device)  # (T, S)
        if prefix is not None:  # (B, 1, T, S): the prefix's keys are open to every query
            tri = tri | (torch.arange(S, device=like.device)[None, :] < prefix.to(like.device)[:, None])[:, None, None, :]
        allowed = tri if allowed is None else allowed & tri  # (B, 1, T, S)
    if bias is None:
        return allowed, False
    bias = bias.to(like.dtype)
    return (bias if allowed is None else bias.masked_fill(~allowed, float("-inf"))), False

"""Multi-head scaled dot-product attention (Sec 3.2.1-3.2.2)."""

from __future__ import annotations

import math
from typing import Literal, get_args

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.blocks.context import LayerContext

AttentionKind = Literal["self", "causal_self", "cross"]
_Projected = tuple[Tensor, Tensor, Tensor, Tensor | None]  # q, k, v, key padding


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V (Sec 3.2.1, eq. 1). d_k and d_v are free of
    d_model / h (Table 3 rows A and B vary them); W^O maps h * d_v back to d_model.

    kind="self" and "causal_self" project Q, K, V from x with one fused matmul; "cross" takes Q
    from x and K, V from the encoder memory (Sec 3.2.3). "causal_self" lets position i attend to
    positions <= i only. Padded keys are masked everywhere; without a padding mask SDPA may take
    its fused kernels (flash on CUDA).

    x (and the memory) may hold only the non-padding rows of the sequence (`ctx.packed`,
    `ctx.memory_packed`): the projections then run on those rows alone, and attention unpacks
    them for SDPA and packs its output.

    With `ctx.state` set the module decodes incrementally: causal self-attention appends this
    step's keys and values to the cache and attends over all cached positions; cross-attention
    projects the memory once and reuses it.

    `attention_weights(x, ctx)` returns the softmax weights (B, h, T, S) that `forward(x, ctx)`
    applies, before attention dropout (for attention maps).
    """

    def __init__(
        self,
        *,
        d_model: int,
        h: int,
        d_k: int,
        d_v: int,
        bias: bool = True,
        attn_dropout: float = 0.0,
        kind: AttentionKind,
    ) -> None:
        super().__init__()
        if kind not in get_args(AttentionKind):
            raise ValueError(f"kind ({kind!r}) must be one of {get_args(AttentionKind)}")
        for name, value in (("d_model", d_model), ("h", h), ("d_k", d_k), ("d_v", d_v)):
            if value < 1:
                raise ValueError(f"{name} ({value}) must be >= 1")
        if not 0.0 <= attn_dropout < 1.0:
            raise ValueError(f"attn_dropout ({attn_dropout}) must be in [0, 1)")
        self.d_model, self.h, self.d_k, self.d_v = d_model, h, d_k, d_v
        self.kind: AttentionKind = kind
        self.attn_dropout = attn_dropout
        if kind == "cross":
            self.w_q = nn.Linear(d_model, h * d_k, bias=bias)
            self.w_kv = nn.Linear(d_model, h * (d_k + d_v), bias=bias)
        else:
            self.w_qkv = nn.Linear(d_model, h * (2 * d_k + d_v), bias=bias)
        self.w_o = nn.Linear(h * d_v, d_model, bias=bias)

    def forward(self, x: Tensor, ctx: LayerContext) -> Tensor:
        if self.kind == "cross":
            q, k, v, key_padding = self._project_cross(x, ctx)
        else:
            q, k, v, key_padding = self._project_self(x, ctx)
        # q (B, h, T, d_k), k (B, h, S, d_k), v (B, h, S, d_v), key_padding (B, S) or None
        B, T = q.size(0), q.size(2)
        mask, is_causal = self._mask(key_padding, T, k.size(2), x.device)
        dropout_p = self.attn_dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal
        )  # (B, h, T, d_v)
        out = out.transpose(1, 2).reshape(B, T, self.h * self.d_v)  # (B, T, h*d_v)
        if ctx.packed is not None:
            out = ctx.packed.pack(out)  # (n, h*d_v)
        return self.w_o(out)  # (B, T, d_model), or (n, d_model) packed

    def attention_weights(self, x: Tensor, ctx: LayerContext) -> Tensor:
        """softmax(Q K^T / sqrt(d_k)) (B, h, T, S) with the masks of `forward`; not incremental."""
        if ctx.state is not None:
            raise ValueError("attention_weights reads a whole sequence: call it without ctx.state")
        project = self._project_cross if self.kind == "cross" else self._project_self
        q, k, _, key_padding = project(x, ctx)
        mask, is_causal = self._mask(key_padding, q.size(2), k.size(2), x.device)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)  # (B, h, T, S)
        if is_causal:
            mask = torch.ones(scores.shape[-2:], dtype=torch.bool, device=x.device).tril()
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return scores.softmax(dim=-1)

    def _heads(self, t: Tensor, d: int) -> Tensor:
        B, T, _ = t.shape
        return t.view(B, T, self.h, d).transpose(1, 2)  # (B, h, T, d)

    def _project_self(self, x: Tensor, ctx: LayerContext) -> _Projected:
        if ctx.packed is not None and self.kind != "causal_self" and ctx.self_padding_mask is None:
            raise ValueError(
                f"packed rows need kind='causal_self' (its queries never read the rows left out) or a "
                f"self_padding_mask that masks them, this attention is kind={self.kind!r} without one"
            )
        hk, hv = self.h * self.d_k, self.h * self.d_v
        q, k, v = _unpacked(self.w_qkv(x), ctx).split([hk, hk, hv], dim=-1)  # (B, T, h*d_k) x2, (B, T, h*d_v)
        q, k, v = self._heads(q, self.d_k), self._heads(k, self.d_k), self._heads(v, self.d_v)
        key_padding = ctx.self_padding_mask
        if ctx.state is not None:
            if self.kind != "causal_self":
                raise ValueError(
                    f"incremental decoding needs kind='causal_self', this attention is kind={self.kind!r}: "
                    "bidirectional self-attention cannot be computed one step at a time"
                )
            k, v, key_padding = self._append(*ctx.state.take_cache(self), k, v, key_padding)
        return q, k, v, key_padding

    def _project_cross(self, x: Tensor, ctx: LayerContext) -> _Projected:
        if ctx.memory is None:
            raise ValueError("cross-attention needs the encoder output in ctx.memory, got None")
        q = self._heads(_unpacked(self.w_q(x), ctx), self.d_k)  # (B, h, T, d_k)
        cache = ctx.state.memory_cache(self) if ctx.state is not None else {}
        if "k" not in cache:
            kv = self.w_kv(ctx.memory)  # (B, S, h*(d_k+d_v)), or (n, ...) of packed memory
            if ctx.memory_packed is not None:
                kv = ctx.memory_packed.unpack(kv)
            k, v = kv.split([self.h * self.d_k, self.h * self.d_v], dim=-1)
            cache["k"], cache["v"] = self._heads(k, self.d_k), self._heads(v, self.d_v)
        return q, cache["k"], cache["v"], ctx.memory_padding_mask

    @staticmethod
    def _append(
        cache: dict[str, Tensor], rows: Tensor | None, k: Tensor, v: Tensor, key_padding: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """This step's keys/values (and padding) after the cached ones, whose rows `rows` (a
        pending reorder) are selected in the same copy."""
        B, T = k.size(0), k.size(2)
        if key_padding is not None or "padding" in cache:
            past_B, past = (cache["k"].size(0), cache["k"].size(2)) if "k" in cache else (B, 0)
            old = cache.get("padding", k.new_zeros(past_B, past, dtype=torch.bool))
            new = key_padding if key_padding is not None else k.new_zeros(B, T, dtype=torch.bool)
            key_padding = cache["padding"] = _select_cat(old, rows, new)  # (B, S)
        if "k" in cache:
            k, v = _select_cat(cache["k"], rows, k), _select_cat(cache["v"], rows, v)
        cache["k"], cache["v"] = k, v
        return k, v, key_padding

    def _mask(
        self, key_padding: Tensor | None, T: int, S: int, device: torch.device
    ) -> tuple[Tensor | None, bool]:
        """Boolean mask (True = may attend), broadcastable to (B, h, T, S), and the is_causal flag."""
        causal = self.kind == "causal_self"
        if causal and key_padding is None and T == S:
            return None, True  # lets SDPA pick its fused causal kernels
        mask = None if key_padding is None else ~key_padding[:, None, None, :]  # (B, 1, 1, S)
        if causal and T > 1:
            # queries are the last T of S positions: query i sees keys 0 .. S - T + i
            allowed = torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=S - T)
            mask = allowed if mask is None else mask & allowed  # (B, 1, T, S)
        return mask, False

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}, d_model={self.d_model}, h={self.h}, d_k={self.d_k}, d_v={self.d_v}"


def _unpacked(projected: Tensor, ctx: LayerContext) -> Tensor:
    """A projection of x as (B, T, width): packed rows go back to their places, zeros elsewhere
    (a causal query of a packed prefix never reads them; what padding queries compute is dropped)."""
    return projected if ctx.packed is None else ctx.packed.unpack(projected)


def _select_cat(old: Tensor, rows: Tensor | None, new: Tensor) -> Tensor:
    """cat([old[rows], new], dim=-2 for 4-D, -1 for 2-D) in one copy of `old`."""
    dim = 2 if old.dim() == 4 else 1
    if rows is None:
        return torch.cat([old, new], dim=dim)
    if torch.is_grad_enabled() and (old.requires_grad or new.requires_grad):  # out= has no autograd
        return torch.cat([old.index_select(0, rows.to(old.device)), new], dim=dim)
    shape = list(new.shape)
    shape[dim] += old.size(dim)
    out = new.new_empty(shape)
    torch.index_select(old, 0, rows.to(old.device), out=out.narrow(dim, 0, old.size(dim)))
    out.narrow(dim, old.size(dim), new.size(dim)).copy_(new)
    return out

"""Multi-head scaled dot-product attention (Sec 3.2.1-3.2.2), with seams for its successors."""

from __future__ import annotations

import math
from typing import Literal, get_args

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.blocks.context import LayerContext
from aiayn.blocks.sublayer import Sublayer

AttentionKind = Literal["self", "causal_self", "cross"]
_Projected = tuple[Tensor, Tensor, Tensor, Tensor | None]  # q, k, v, key padding


class MultiHeadAttention(Sublayer):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + B) V (Sec 3.2.1, eq. 1; no bias B in the
    paper). d_k and d_v are free of d_model / h (Table 3 rows A and B vary them); W^O maps
    h * d_v back to d_model.

    `kind` says what the queries read: "self" and "causal_self" project Q, K, V from x with one
    fused matmul, and "causal_self" lets position i attend to positions <= i only; "cross" takes
    Q from x and K, V from the encoder memory (Sec 3.2.3). Padded keys are masked everywhere;
    without a padding mask or a bias SDPA may take its fused kernels (flash on CUDA).

    Seams, each off by default (the paper's attention), so that a successor is a module handed in:
      kv_heads    K and V have kv_heads heads, each read by h / kv_heads query heads (grouped-query;
                  1: multi-query); the decoding cache holds only those.
      positions   a module (q, k, offset) -> (q, k), applied after the projections and before the
                  decoding cache: q (B, h, T, d_k), k (B, kv_heads, T, d_k) at positions offset ..
                  offset + T - 1 (rotary embeddings). Not for cross-attention.
      score_bias  a module (T, S) -> (h or 1, T, S) added to the scores, whose queries are the last
                  T of the S key positions. Self-attention also adds `ctx.position_bias`, the bias
                  its stack shares (T5's relative position bias).
    `score_mask` alone turns padding, causality and biases into what SDPA is given, and
    `attention_weights` applies that the way SDPA does: the maps are the forward's weights.

    x (and the memory) may hold only the non-padding rows of the sequence (`ctx.packed`,
    `ctx.memory_packed`): the projections then run on those rows alone, and attention unpacks
    them for SDPA and packs its output.

    With `ctx.state` set the module decodes incrementally: causal self-attention appends this
    step's keys and values to the cache and attends over all cached positions; cross-attention
    projects the memory once and reuses it.
    """

    attention_maps = True

    def __init__(
        self,
        *,
        d_model: int,
        h: int,
        d_k: int,
        d_v: int,
        kind: AttentionKind,
        kv_heads: int | None = None,
        bias: bool = True,
        attn_dropout: float = 0.0,
        positions: nn.Module | None = None,
        score_bias: nn.Module | None = None,
    ) -> None:
        super().__init__()
        if kind not in get_args(AttentionKind):
            raise ValueError(f"kind ({kind!r}) must be one of {get_args(AttentionKind)}")
        kv_heads = h if kv_heads is None else kv_heads
        for name, value in (("d_model", d_model), ("h", h), ("d_k", d_k), ("d_v", d_v), ("kv_heads", kv_heads)):
            if value < 1:
                raise ValueError(f"{name} ({value}) must be >= 1")
        if h % kv_heads:
            raise ValueError(f"kv_heads ({kv_heads}) must divide h ({h}): each K/V head serves h / kv_heads query heads")
        if not 0.0 <= attn_dropout < 1.0:
            raise ValueError(f"attn_dropout ({attn_dropout}) must be in [0, 1)")
        if positions is not None and kind == "cross":
            raise ValueError(
                "positions transform the queries and keys of one sequence, but kind='cross' takes its keys "
                "from the encoder memory; give positions to self-attention"
            )
        self.d_model, self.h, self.d_k, self.d_v, self.kv_heads = d_model, h, d_k, d_v, kv_heads
        self.kind: AttentionKind = kind
        self.attn_dropout = attn_dropout
        q, k, v = h * d_k, kv_heads * d_k, kv_heads * d_v
        if kind == "cross":
            self.w_q = nn.Linear(d_model, q, bias=bias)
            self.w_kv = nn.Linear(d_model, k + v, bias=bias)
        else:
            self.w_qkv = nn.Linear(d_model, q + k + v, bias=bias)
        self.w_o = nn.Linear(h * d_v, d_model, bias=bias)
        self.positions = positions
        self.score_bias = score_bias
        self._sdpa_options = {"enable_gqa": True} if kv_heads != h else {}

    @property
    def reads_memory(self) -> bool:  # type: ignore[override]
        return self.kind == "cross"

    @property
    def map_name(self) -> str:
        return self.kind

    def forward(self, x: Tensor, ctx: LayerContext) -> Tensor:
        q, k, v, key_padding = self._project(x, ctx)
        # q (B, h, T, d_k), k (B, kv_heads, S, d_k), v (B, kv_heads, S, d_v), key_padding (B, S) or None
        B, T = q.size(0), q.size(2)
        mask, is_causal = self.score_mask(key_padding, T, k.size(2), ctx, like=q)
        dropout_p = self.attn_dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, **self._sdpa_options
        )  # (B, h, T, d_v)
        out = out.transpose(1, 2).reshape(B, T, self.h * self.d_v)  # (B, T, h*d_v)
        if ctx.packed is not None:
            out = ctx.packed.pack(out)  # (n, h*d_v)
        return self.w_o(out)  # (B, T, d_model), or (n, d_model) packed

    def attention_weights(self, x: Tensor, ctx: LayerContext) -> Tensor:
        """The softmax weights (B, h, T, S) that `forward(x, ctx)` applies, before attention
        dropout: scores with `score_mask` applied as SDPA applies it. Not incremental."""
        if ctx.state is not None:
            raise ValueError("attention_weights reads a whole sequence: call it without ctx.state")
        q, k, _, key_padding = self._project(x, ctx)
        mask, is_causal = self.score_mask(key_padding, q.size(2), k.size(2), ctx, like=q)
        k = k.repeat_interleave(self.h // self.kv_heads, dim=1)  # (B, h, S, d_k): query head i reads K/V head i // group
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)  # (B, h, T, S)
        if is_causal:
            mask = torch.ones(scores.shape[-2:], dtype=torch.bool, device=x.device).tril()
        if mask is not None and mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        elif mask is not None:
            scores = scores + mask
        return scores.softmax(dim=-1)

    def score_mask(
        self, key_padding: Tensor | None, T: int, S: int, ctx: LayerContext, *, like: Tensor
    ) -> tuple[Tensor | None, bool]:
        """What SDPA adds to Q K^T / sqrt(d_k), broadcastable to (B, h, T, S), and its is_causal
        flag: (None, True) for a causal query without padding or bias (SDPA's fused causal
        kernels); a boolean mask (True: may attend) without a bias; else the biases summed, in
        the queries' dtype, -inf where a key may not be read. Queries are the last T of S positions."""
        bias = self._bias(T, S, ctx)
        causal = self.kind == "causal_self"
        if causal and bias is None and key_padding is None and T == S:
            return None, True
        allowed = None if key_padding is None else ~key_padding[:, None, None, :]  # (B, 1, 1, S)
        if causal and T > 1:
            # queries are the last T of S positions: query i sees keys 0 .. S - T + i
            tri = torch.ones(T, S, dtype=torch.bool, device=like.device).tril(diagonal=S - T)
            allowed = tri if allowed is None else allowed & tri  # (B, 1, T, S)
        if bias is None:
            return allowed, False
        bias = bias.to(like.dtype)
        return (bias if allowed is None else bias.masked_fill(~allowed, float("-inf"))), False

    def projections(self) -> dict[str, tuple[Tensor, Tensor | None]]:
        """(weight (out, in), bias) of W^Q, W^K, W^V and W^O, split out of the fused projections;
        rows are head-major (head i of Q: rows i * d_k .. (i + 1) * d_k - 1)."""
        sizes = [self.h * self.d_k, self.kv_heads * self.d_k, self.kv_heads * self.d_v]
        if self.kind == "cross":
            q = (self.w_q.weight, self.w_q.bias)
            k, v = _split(self.w_kv, sizes[1:])
        else:
            q, k, v = _split(self.w_qkv, sizes)
        return {"q": q, "k": k, "v": v, "o": (self.w_o.weight, self.w_o.bias)}

    def _bias(self, T: int, S: int, ctx: LayerContext) -> Tensor | None:
        shared = ctx.position_bias if self.kind != "cross" else None
        biases = [module(T, S) for module in (self.score_bias, shared) if module is not None]  # (h or 1, T, S) each
        return None if not biases else biases[0] if len(biases) == 1 else biases[0] + biases[1]

    def _heads(self, t: Tensor, heads: int, d: int) -> Tensor:
        B, T, _ = t.shape
        return t.view(B, T, heads, d).transpose(1, 2)  # (B, heads, T, d)

    def _project(self, x: Tensor, ctx: LayerContext) -> _Projected:
        return self._project_cross(x, ctx) if self.kind == "cross" else self._project_self(x, ctx)

    def _project_self(self, x: Tensor, ctx: LayerContext) -> _Projected:
        if ctx.packed is not None and self.kind != "causal_self" and ctx.self_padding_mask is None:
            raise ValueError(
                f"packed rows need kind='causal_self' (its queries never read the rows left out) or a "
                f"self_padding_mask that masks them, this attention is kind={self.kind!r} without one"
            )
        hk, kk, kv = self.h * self.d_k, self.kv_heads * self.d_k, self.kv_heads * self.d_v
        q, k, v = _unpacked(self.w_qkv(x), ctx).split([hk, kk, kv], dim=-1)  # (B, T, h*d_k), (B, T, kv*d_k), (B, T, kv*d_v)
        q, k, v = self._heads(q, self.h, self.d_k), self._heads(k, self.kv_heads, self.d_k), self._heads(v, self.kv_heads, self.d_v)
        if self.positions is not None:
            q, k = self.positions(q, k, 0 if ctx.state is None else ctx.state.length)
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
        q = self._heads(_unpacked(self.w_q(x), ctx), self.h, self.d_k)  # (B, h, T, d_k)
        cache = ctx.state.memory_cache(self) if ctx.state is not None else {}
        if "k" not in cache:
            kv = self.w_kv(ctx.memory)  # (B, S, kv*(d_k+d_v)), or (n, ...) of packed memory
            if ctx.memory_packed is not None:
                kv = ctx.memory_packed.unpack(kv)
            k, v = kv.split([self.kv_heads * self.d_k, self.kv_heads * self.d_v], dim=-1)
            cache["k"], cache["v"] = self._heads(k, self.kv_heads, self.d_k), self._heads(v, self.kv_heads, self.d_v)
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

    def extra_repr(self) -> str:
        heads = f", kv_heads={self.kv_heads}" if self.kv_heads != self.h else ""
        return f"kind={self.kind!r}, d_model={self.d_model}, h={self.h}{heads}, d_k={self.d_k}, d_v={self.d_v}"


def _split(lin: nn.Linear, sizes: list[int]) -> list[tuple[Tensor, Tensor | None]]:
    weights = lin.weight.split(sizes, dim=0)
    biases = lin.bias.split(sizes, dim=0) if lin.bias is not None else [None] * len(sizes)
    return list(zip(weights, biases))


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

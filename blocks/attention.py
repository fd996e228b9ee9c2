"""Multi-head scaled dot-product attention (Sec 3.2.1-3.2.2), composed of parts handed in."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor, nn

from aiayn.blocks.context import LayerContext
from aiayn.blocks.masks import CausalMask, attention_mask
from aiayn.blocks.score import ScoreStep, Softmax
from aiayn.blocks.sublayer import Sublayer

_Projected = tuple[Tensor, Tensor, Tensor, Tensor | None]  # q, k, v, key padding


class MultiHeadAttention(Sublayer):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + B) V (Sec 3.2.1, eq. 1; no bias B in the
    paper). d_k and d_v are free of d_model / h (Table 3 rows A and B vary them); W^O maps
    h * d_v back to d_model.

    What the queries read is decided by the inputs and the parts handed in, never by a mode: a
    subclass says where keys and values come from (`SelfAttention`: x itself; `CrossAttention`:
    the encoder memory, Sec 3.2.3), `mask` which of them a query may read (None: all; a
    `CausalMask`, with or without a window), and padded keys are masked everywhere; without a
    padding mask or a bias SDPA may take its fused kernels (flash on CUDA).

    Parts, each absent by default (the paper's attention), so that a successor is a module handed in:
      kv_heads    K and V have kv_heads heads, each read by h / kv_heads query heads (grouped-query;
                  1: multi-query); the decoding cache holds only those.
      qk          modules (q, k, offset) -> (q, k), applied in order after the projections and
                  before the decoding cache: q (B, h, T, d_k), k (B, kv_heads, T, d_k), the
                  queries at positions offset .. offset + T - 1 (QK-norm, rotary embeddings). A
                  module whose `positional` is true turns q and k by their positions, which
                  cross-attention's keys do not share with its queries.
      score_bias  a module (T, S) -> (h or 1, T, S) added to the scores, whose queries are the last
                  T of the S key positions. Self-attention also adds `ctx.position_bias`, the bias
                  its stack shares (T5's relative position bias).
      score       the step from scores to weights (blocks/score.py): the paper's softmax, by SDPA,
                  by default; a capped or sigmoid one is a step handed in.
    `attention_weights` are the score step's weights, the very ones the forward applies.

    x (and the memory) may hold only the non-padding rows of the sequence (`ctx.packed`,
    `ctx.memory_packed`): the projections then run on those rows alone, and attention unpacks
    them for SDPA and packs its output. With `ctx.state` set the module decodes incrementally.

    :param d_model: the width of x and of the output
    :param h: query heads
    :param d_k: the width of a head's queries and keys
    :param d_v: the width of a head's values
    :param kv_heads: key and value heads (grouped-query; None: h)
    :param bias: the projections have biases (the paper's)
    :param attn_dropout: dropout on the attention weights (off in the paper)
    :param mask: which keys a query reads (a CausalMask; None: all)
    :param qk: modules (q, k, offset) -> (q, k), in order (QK-norm, rotary)
    :param score_bias: a module (T, S) -> (h or 1, T, S) added to the scores
    :param score: the step from scores to weights (None: the paper's softmax)
    """

    attention_maps = True
    reads_stack_bias = False  # whether ctx.position_bias (the stack's, for its self-attentions) applies

    def __init__(
        self,
        *,
        d_model: int,
        h: int,
        d_k: int,
        d_v: int,
        kv_heads: int | None = None,
        bias: bool = True,
        attn_dropout: float = 0.0,
        mask: CausalMask | None = None,
        qk: Sequence[nn.Module] = (),
        score_bias: nn.Module | None = None,
        score: ScoreStep | None = None,
    ) -> None:
        super().__init__()
        kv_heads = h if kv_heads is None else kv_heads
        for name, value in (("d_model", d_model), ("h", h), ("d_k", d_k), ("d_v", d_v), ("kv_heads", kv_heads)):
            if value < 1:
                raise ValueError(f"{name} ({value}) must be >= 1")
        if h % kv_heads:
            raise ValueError(f"kv_heads ({kv_heads}) must divide h ({h}): each K/V head serves h / kv_heads query heads")
        if not 0.0 <= attn_dropout < 1.0:
            raise ValueError(f"attn_dropout ({attn_dropout}) must be in [0, 1)")
        self.d_model, self.h, self.d_k, self.d_v, self.kv_heads = d_model, h, d_k, d_v, kv_heads
        self.attn_dropout, self.mask = attn_dropout, mask
        self.make_projections(bias)  # W^Q, W^K, W^V as the inputs need them, before W^O (the order of initialisation)
        self.w_o = nn.Linear(h * d_v, d_model, bias=bias)
        self.qk = nn.ModuleList(qk)
        self.score_bias = score_bias
        self.score = Softmax() if score is None else score

    @property
    def map_name(self) -> str:
        """The attention maps' name in TensorBoard: self, causal_self or cross."""
        return ("causal_self" if self.mask is not None else "self") if not self.reads_memory else "cross"

    def make_projections(self, bias: bool) -> None:
        """Create the input projections (W^Q, W^K, W^V, fused as the inputs allow)."""
        raise NotImplementedError

    def project(self, x: Tensor, ctx: LayerContext) -> _Projected:
        """q (B, h, T, d_k), k (B, kv_heads, S, d_k), v (B, kv_heads, S, d_v) and the keys' padding (B, S) or None."""
        raise NotImplementedError

    def projections(self) -> dict[str, tuple[Tensor, Tensor | None]]:
        """(weight (out, in), bias) of W^Q, W^K, W^V and W^O; rows are head-major (head i of Q:
        rows i * d_k .. (i + 1) * d_k - 1)."""
        raise NotImplementedError

    def forward(self, x: Tensor, ctx: LayerContext) -> Tensor:
        q, k, v, key_padding = self.project(x, ctx)
        B, T, S = q.size(0), q.size(2), k.size(2)
        mask, is_causal = attention_mask(self.mask, key_padding, self.bias(T, S, ctx), T, S, like=q, prefix=self.prefix(ctx))
        dropout_p = self.attn_dropout if self.training else 0.0
        out = self.score.attend(q, k, v, mask, is_causal, dropout_p)  # (B, h, T, d_v)
        out = out.transpose(1, 2).reshape(B, T, self.h * self.d_v)  # (B, T, h*d_v)
        if ctx.packed is not None:
            out = ctx.packed.pack(out)  # (n, h*d_v)
        return self.w_o(out)  # (B, T, d_model), or (n, d_model) packed

    def attention_weights(self, x: Tensor, ctx: LayerContext) -> Tensor:
        """The weights (B, h, T, S) that `forward(x, ctx)` applies, before attention dropout:
        the score step's, with the mask applied as SDPA applies it. Not incremental."""
        if ctx.state is not None:
            raise ValueError("attention_weights reads a whole sequence: call it without ctx.state")
        q, k, _, key_padding = self.project(x, ctx)
        T, S = q.size(2), k.size(2)
        mask, is_causal = attention_mask(self.mask, key_padding, self.bias(T, S, ctx), T, S, like=q, prefix=self.prefix(ctx))
        return self.score.weights(q, k, mask, is_causal)

    def bias(self, T: int, S: int, ctx: LayerContext) -> Tensor | None:
        """The score biases summed (h or 1, T, S): score_bias, and the stack's where it applies."""
        shared = ctx.position_bias if self.reads_stack_bias else None
        biases = [module(T, S) for module in (self.score_bias, shared) if module is not None]
        return None if not biases else biases[0] if len(biases) == 1 else biases[0] + biases[1]

    def prefix(self, ctx: LayerContext) -> Tensor | None:
        """The rows' prefix lengths (ctx.prefix) where this attention's causal mask opens to them:
        self-attention's; cross-attention reads its memory whole anyway."""
        return ctx.prefix if not self.reads_memory and self.mask is not None else None

    def transformed(self, q: Tensor, k: Tensor, offset: int) -> tuple[Tensor, Tensor]:
        for module in self.qk:
            q, k = module(q, k, offset)
        return q, k

    def heads(self, t: Tensor, heads: int, d: int) -> Tensor:
        B, T, _ = t.shape
        return t.view(B, T, heads, d).transpose(1, 2)  # (B, heads, T, d)

    def extra_repr(self) -> str:
        heads = f", kv_heads={self.kv_heads}" if self.kv_heads != self.h else ""
        return f"d_model={self.d_model}, h={self.h}{heads}, d_k={self.d_k}, d_v={self.d_v}, mask={self.mask}"


class SelfAttention(MultiHeadAttention):
    """Queries, keys and values from x, with one fused projection. Incremental decoding appends
    each step's keys and values to the cache, which needs a causal mask: a query may not read a
    later position, which is not there yet."""

    reads_stack_bias = True

    def make_projections(self, bias: bool) -> None:
        self.w_qkv = nn.Linear(self.d_model, self.h * self.d_k + self.kv_heads * (self.d_k + self.d_v), bias=bias)

    def projections(self) -> dict[str, tuple[Tensor, Tensor | None]]:
        q, k, v = _split(self.w_qkv, [self.h * self.d_k, self.kv_heads * self.d_k, self.kv_heads * self.d_v])
        return {"q": q, "k": k, "v": v, "o": (self.w_o.weight, self.w_o.bias)}

    def project(self, x: Tensor, ctx: LayerContext) -> _Projected:
        if ctx.packed is not None and self.mask is None and ctx.self_padding_mask is None:
            raise ValueError(
                "packed rows need a causal mask (its queries never read the rows left out) or a self_padding_mask that "
                "masks them; this self-attention has neither"
            )
        sizes = [self.h * self.d_k, self.kv_heads * self.d_k, self.kv_heads * self.d_v]
        q, k, v = _unpacked(self.w_qkv(x), ctx).split(sizes, dim=-1)  # (B, T, h*d_k), (B, T, kv*d_k), (B, T, kv*d_v)
        q, k, v = self.heads(q, self.h, self.d_k), self.heads(k, self.kv_heads, self.d_k), self.heads(v, self.kv_heads, self.d_v)
        q, k = self.transformed(q, k, 0 if ctx.state is None else ctx.state.length)
        key_padding = ctx.self_padding_mask
        if ctx.state is not None:
            if self.mask is None:
                raise ValueError(
                    "incremental decoding needs a causal mask: a self-attention whose queries read later positions "
                    "cannot be computed one step at a time"
                )
            k, v, key_padding = ctx.state.append(self, k, v, key_padding)
        return q, k, v, key_padding


class CrossAttention(MultiHeadAttention):
    """Queries from x, keys and values from the encoder memory (Sec 3.2.3), projected once per
    sentence when decoding. Its keys' positions are not its queries': a positional q/k module
    (rotary) is refused.

    :param parts: MultiHeadAttention's keyword arguments (`aiayn.attention_parts` makes them)"""

    reads_memory = True

    def __init__(self, **parts: Any) -> None:
        positional = [type(m).__name__ for m in parts.get("qk", ()) if getattr(m, "positional", False)]
        if positional:
            raise ValueError(
                f"{positional[0]} turns queries and keys by their positions in one sequence, but cross-attention takes its keys "
                "from the encoder memory; give it to self-attention"
            )
        super().__init__(**parts)

    def make_projections(self, bias: bool) -> None:
        self.w_q = nn.Linear(self.d_model, self.h * self.d_k, bias=bias)
        self.w_kv = nn.Linear(self.d_model, self.kv_heads * (self.d_k + self.d_v), bias=bias)

    def projections(self) -> dict[str, tuple[Tensor, Tensor | None]]:
        k, v = _split(self.w_kv, [self.kv_heads * self.d_k, self.kv_heads * self.d_v])
        return {"q": (self.w_q.weight, self.w_q.bias), "k": k, "v": v, "o": (self.w_o.weight, self.w_o.bias)}

    def project(self, x: Tensor, ctx: LayerContext) -> _Projected:
        if ctx.memory is None:
            raise ValueError("cross-attention needs the encoder output in ctx.memory, got None")
        q = self.heads(_unpacked(self.w_q(x), ctx), self.h, self.d_k)  # (B, h, T, d_k)
        cache = ctx.state.memory_cache(self) if ctx.state is not None else {}
        if "k" not in cache:
            kv = self.w_kv(ctx.memory)  # (B, S, kv*(d_k+d_v)), or (n, ...) of packed memory
            if ctx.memory_packed is not None:
                kv = ctx.memory_packed.unpack(kv)
            k, v = kv.split([self.kv_heads * self.d_k, self.kv_heads * self.d_v], dim=-1)
            cache["k"], cache["v"] = self.heads(k, self.kv_heads, self.d_k), self.heads(v, self.kv_heads, self.d_v)
        q, k = self.transformed(q, cache["k"], 0 if ctx.state is None else ctx.state.length)
        return q, k, cache["v"], ctx.memory_padding_mask


def _split(lin: nn.Linear, sizes: list[int]) -> list[tuple[Tensor, Tensor | None]]:
    weights = lin.weight.split(sizes, dim=0)
    biases = lin.bias.split(sizes, dim=0) if lin.bias is not None else [None] * len(sizes)
    return list(zip(weights, biases))


def _unpacked(projected: Tensor, ctx: LayerContext) -> Tensor:
    """A projection of x as (B, T, width): packed rows go back to their places, zeros elsewhere
    (a causal query of a packed prefix never reads them; what padding queries compute is dropped)."""
    return projected if ctx.packed is None else ctx.packed.unpack(projected)

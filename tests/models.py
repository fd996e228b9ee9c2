"""Shared test fixtures for blocks: a tiny EncoderDecoder wired from blocks the way the builder
wires them, and our attention with the weights of torch.nn.MultiheadAttention copied in."""

import torch
from torch import nn

from aiayn.blocks import (
    AddNorm,
    CausalMask,
    CrossAttention,
    EncoderDecoder,
    InputEmbedding,
    LearnedPositionalEmbedding,
    MultiHeadAttention,
    OutputProjection,
    PositionwiseFeedForward,
    ScaledEmbedding,
    SelfAttention,
    SinusoidalPositionalEncoding,
    TransformerLayer,
    TransformerStack,
)

PAD, BOS, EOS = 0, 1, 2


def attention_of(kind: str, **parts) -> MultiHeadAttention:
    """The paper's three attentions by their roles: self, causal_self (a causal mask) and cross."""
    if kind == "cross":
        return CrossAttention(**parts)
    return SelfAttention(mask=CausalMask() if kind == "causal_self" else None, **parts)


def tiny_model(
    *, vocab: int = 13, d_model: int = 8, h: int = 2, d_k: int = 3, d_v: int = 5, d_ff: int = 16, n_enc: int = 2,
    n_dec: int = 2, norm_first: bool = False, learned_positions: bool = False, dropout: float = 0.1, tied: bool = True,
) -> EncoderDecoder:  # fmt: skip
    """One shared table; with `tied` the projection is that table and has no bias (the paper's),
    else it has its own weight and a bias."""

    def add_norm(sublayer: nn.Module) -> AddNorm:
        return AddNorm(sublayer=sublayer, norm=nn.LayerNorm(d_model, eps=1e-6), dropout=dropout, norm_first=norm_first)

    def attention(kind: str) -> AddNorm:
        return add_norm(attention_of(kind, d_model=d_model, h=h, d_k=d_k, d_v=d_v))

    def ffn() -> AddNorm:
        return add_norm(PositionwiseFeedForward(d_model=d_model, d_ff=d_ff, activation=nn.ReLU()))

    def positional() -> nn.Module:
        if learned_positions:
            return LearnedPositionalEmbedding(max_len=64, d_model=d_model)
        return SinusoidalPositionalEncoding(d_model=d_model)

    def stack(sublayers: list[str] | None, n: int) -> TransformerStack:
        layers = [TransformerLayer(sublayers=[attention(k) for k in sublayers] + [ffn()]) for _ in range(n)]
        return TransformerStack(layers=layers, final_norm=nn.LayerNorm(d_model, eps=1e-6) if norm_first else None)

    table = nn.Embedding(vocab, d_model)
    embed = ScaledEmbedding(table=table, scale=True)
    return EncoderDecoder(
        src_embed=InputEmbedding(token=embed, positional=positional(), dropout=dropout),
        tgt_embed=InputEmbedding(token=embed, positional=positional(), dropout=dropout),
        encoder=stack(["self"], n_enc),
        decoder=stack(["causal_self", "cross"], n_dec),
        generator=OutputProjection(d_model=d_model, vocab_size=vocab, bias=not tied, tied_weight=table.weight if tied else None),
        pad_id=PAD,
    )


def attention_from_torch(ref: nn.MultiheadAttention, kind: str) -> MultiHeadAttention:
    """Our attention holding `ref`'s weights: in_proj rows are [W^Q; W^K; W^V]; ours fuses them
    for self-attention and splits Q from the fused [W^K; W^V] for cross-attention."""
    d_model, h = ref.embed_dim, ref.num_heads
    ours = attention_of(kind, d_model=d_model, h=h, d_k=d_model // h, d_v=d_model // h)
    with torch.no_grad():
        if kind == "cross":
            ours.w_q.weight.copy_(ref.in_proj_weight[:d_model])
            ours.w_q.bias.copy_(ref.in_proj_bias[:d_model])
            ours.w_kv.weight.copy_(ref.in_proj_weight[d_model:])
            ours.w_kv.bias.copy_(ref.in_proj_bias[d_model:])
        else:
            ours.w_qkv.weight.copy_(ref.in_proj_weight)
            ours.w_qkv.bias.copy_(ref.in_proj_bias)
        ours.w_o.load_state_dict(ref.out_proj.state_dict())
    return ours

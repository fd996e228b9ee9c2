"""The blocks of the variants after 2017, each against an independent reference: torch.nn.RMSNorm's
formula, Shazeer's GLU on separate matrices, transformers' LLaMA rotary, the ALiBi paper's
slopes and bias, transformers' T5 buckets."""

import math

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from aiayn.blocks import (
    AlibiBias,
    CausalMask,
    GatedFeedForward,
    LayerContext,
    NoPositions,
    QKNorm,
    Rotary,
    SelfAttention,
    T5RelativeBias,
)
from aiayn.blocks.position_bias import alibi_slopes, t5_bucket
from tests.models import attention_of


def test_rms_norm_is_the_formula():
    norm = nn.RMSNorm(16, eps=1e-6)
    with torch.no_grad():
        norm.weight.normal_()
    x = torch.randn(2, 5, 16)
    assert_close(norm(x), norm.weight * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


@pytest.mark.parametrize("act", [nn.SiLU(), nn.GELU(), nn.ReLU()], ids=["swiglu", "geglu", "reglu"])
def test_gated_feed_forward_is_shazeers_glu_on_copied_weights(act):
    torch.manual_seed(0)
    d, d_ff = 8, 12
    W, V, W2 = nn.Linear(d, d_ff), nn.Linear(d, d_ff), nn.Linear(d_ff, d)
    ours = GatedFeedForward(d_model=d, d_ff=d_ff, activation=act)
    with torch.no_grad():
        ours.w_1.weight.copy_(torch.cat([W.weight, V.weight]))
        ours.w_1.bias.copy_(torch.cat([W.bias, V.bias]))
        ours.w_2.load_state_dict(W2.state_dict())
    x = torch.randn(3, 4, d)
    assert_close(ours(x, LayerContext()), W2(act(W(x)) * V(x)))
    assert sum(p.numel() for p in ours.parameters()) == 3 * d * d_ff + 2 * d_ff + d  # three matrices


@pytest.mark.parametrize("fraction", [1.0, 0.5])
@pytest.mark.parametrize("offset", [0, 3])
def test_rotary_is_transformers_llama_rotary(fraction, offset):
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    d_k, base = 16, 500.0
    dims = int(d_k * fraction)
    q, k = torch.randn(2, 4, 5, d_k), torch.randn(2, 2, 5, d_k)  # 4 query heads, 2 K/V heads
    config = llama.LlamaConfig(
        hidden_size=4 * dims, num_attention_heads=4, head_dim=dims, rope_parameters={"rope_type": "default", "rope_theta": base}
    )
    positions = torch.arange(offset, offset + 5)[None].expand(2, 5)
    cos, sin = llama.LlamaRotaryEmbedding(config)(q, positions)
    theirs_q, theirs_k = llama.apply_rotary_pos_emb(q[..., :dims], k[..., :dims], cos, sin)  # NeoX/Phi: the first dims rotate
    ours_q, ours_k = Rotary(d_k=d_k, dims=dims, base=base)(q, k, offset)
    assert_close(ours_q, torch.cat([theirs_q, q[..., dims:]], -1))
    assert_close(ours_k, torch.cat([theirs_k, k[..., dims:]], -1))


def test_rotary_scores_depend_on_relative_position_only():
    rotary = Rotary(d_k=8, dims=8)
    q, k = torch.randn(1, 1, 1, 8).expand(1, 1, 6, 8), torch.randn(1, 1, 1, 8).expand(1, 1, 6, 8)  # one vector at every position
    rq, rk = rotary(q, k, 0)
    scores = rq[0, 0] @ rk[0, 0].T  # (6, 6)
    for shift in range(1, 5):
        assert_close(torch.diagonal(scores, shift), torch.full((6 - shift,), float(scores[0, shift])))


def test_rotary_past_its_table_computes_the_angles():
    short, long = Rotary(d_k=8, dims=8, max_len=4), Rotary(d_k=8, dims=8, max_len=64)
    q, k = torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 8)
    for a, b in zip(short(q, k, 10), long(q, k, 10)):
        assert_close(a, b)


def test_alibi_slopes_are_the_papers():
    assert alibi_slopes(8) == [2.0 ** -(i + 1) for i in range(8)]  # 1/2, 1/4, ..., 1/256
    assert alibi_slopes(4) == [2.0 ** -(2 * (i + 1)) for i in range(4)]
    assert alibi_slopes(6) == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]  # 4's, then every other of 8's


@pytest.mark.parametrize("kind", ["causal_self", "self"])
def test_alibi_in_attention_is_minus_slope_times_distance(kind):
    torch.manual_seed(0)
    h, T = 4, 5
    attention = attention_of(kind, d_model=8, h=h, d_k=4, d_v=4).eval()
    bias = AlibiBias(h=h)
    x = torch.randn(1, T, 8)
    with_bias = attention.attention_weights(x, LayerContext(position_bias=bias))
    q, k, _ = (t.view(1, T, h, 4).transpose(1, 2) for t in attention.w_qkv(x).split(h * 4, -1))
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    slopes = torch.tensor([2.0 ** (-8 * (n + 1) / h) for n in range(h)])[:, None, None]
    scores = q @ k.transpose(-1, -2) / 2.0 - slopes * (i - j).abs()  # d_k = 4: / sqrt(4)
    if kind == "causal_self":
        scores = scores.masked_fill(j > i, -math.inf)
    assert_close(with_bias, scores.softmax(-1))


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets, max_distance", [(32, 128), (8, 20)])
def test_t5_buckets_are_transformers(bidirectional, num_buckets, max_distance):
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    relative = torch.arange(-300, 300)[None, :]
    theirs = t5.T5Attention._relative_position_bucket(
        relative, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    assert torch.equal(
        t5_bucket(relative, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance), theirs
    )


def test_t5_bias_looks_up_one_table_for_the_last_queries():
    bias = T5RelativeBias(h=3, num_buckets=8, max_distance=20, bidirectional=False)
    full = bias(6, 6)  # (3, 6, 6)
    assert full.shape == (3, 6, 6) and sum(p.numel() for p in bias.parameters()) == 8 * 3
    assert_close(bias(2, 6), full[:, 4:])  # incremental decoding: the last queries' rows
    buckets = t5_bucket(torch.arange(6)[None, :] - torch.arange(6)[:, None], bidirectional=False, num_buckets=8, max_distance=20)
    assert_close(full, bias.table.weight[buckets].permute(2, 0, 1))


def test_no_positions_are_zeros():
    assert torch.equal(NoPositions(d_model=4)(3, 7), torch.zeros(3, 4))


def test_qk_norm_is_an_rms_norm_of_each_head_on_queries_and_keys():
    torch.manual_seed(0)
    norm = QKNorm(d_k=4, eps=1e-6)
    with torch.no_grad():
        norm.q_norm.weight.copy_(torch.randn(4))
        norm.k_norm.weight.copy_(torch.randn(4))
    q, k = torch.randn(2, 3, 5, 4), torch.randn(2, 1, 7, 4)  # q (B, h, T, d_k), k (B, kv_heads, S, d_k)
    nq, nk = norm(q, k, offset=3)

    def reference(x, gain):  # the formula, per head: x / sqrt(mean(x^2) + eps) * g
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * gain

    assert_close(nq, reference(q, norm.q_norm.weight))
    assert_close(nk, reference(k, norm.k_norm.weight))
    assert not QKNorm.positional  # cross-attention may take it
    attention_of("cross", d_model=8, h=2, d_k=4, d_v=4, qk=[norm])


@pytest.mark.parametrize("T, S, window", [(5, 5, 2), (5, 5, 1), (1, 6, 3), (3, 8, 4), (4, 4, 9)])
def test_a_causal_windows_mask_is_the_band_below_the_diagonal(T, S, window):
    allowed = CausalMask(window=window).allowed(T, S, torch.device("cpu"))
    for i in range(T):
        query = S - T + i  # queries are the last T of S positions
        assert allowed[i].tolist() == [query - window < key <= query for key in range(S)]
    assert CausalMask().fused(4, 4) and not CausalMask(window=2).fused(4, 4) and not CausalMask().fused(1, 4)


def test_window_attention_is_softmax_over_the_band_of_keys():
    """An independent reference: eq. 1 written out with the band as a -inf bias."""
    torch.manual_seed(1)
    module = SelfAttention(d_model=8, h=2, d_k=4, d_v=4, mask=CausalMask(window=3)).eval()
    x, padding = torch.randn(2, 6, 8), torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    p = module.projections()
    q, k, v = ((x @ p[n][0].T + p[n][1]).view(2, 6, 2, 4).transpose(1, 2) for n in ("q", "k", "v"))
    scores = q @ k.transpose(-2, -1) / 2.0  # sqrt(d_k) = 2
    i, j = torch.arange(6)[:, None], torch.arange(6)[None, :]
    scores = scores.masked_fill(~((j <= i) & (j > i - 3)), float("-inf")).masked_fill(padding[:, None, None, :], float("-inf"))
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(2, 6, 8) @ p["o"][0].T + p["o"][1]
    ctx = LayerContext(self_padding_mask=padding)
    assert_close(module(x, ctx), out)
    assert_close(module.attention_weights(x, ctx), scores.softmax(-1))

"""MultiHeadAttention's seams: K/V heads, a position transform, a score bias (its own and its
stack's), and attention maps that are the forward's weights whatever the seams add."""

import math

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from aiayn.blocks import DecoderState, LayerContext, MultiHeadAttention, TransformerLayer, TransformerStack
from tests.models import attention_of

D, H, DK, DV = 16, 4, 6, 5


def attention(kind: str, seed: int = 0, **seams) -> MultiHeadAttention:
    torch.manual_seed(seed)
    if "positions" in seams:  # a position transform: the first (here the only) of the q/k modules
        seams["qk"] = [seams.pop("positions")]
    module = attention_of(kind, d_model=D, h=H, d_k=DK, d_v=DV, **seams)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    return module.eval()


def same_weights(src: MultiHeadAttention, dst: MultiHeadAttention) -> MultiHeadAttention:
    dst.load_state_dict(src.state_dict())
    return dst


class Bias(nn.Module):
    """A fixed additive bias (h, T, S) for the last T of S positions, cut from a (h, 9, 9) table."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.table = table

    def forward(self, T: int, S: int) -> torch.Tensor:
        return self.table[:, S - T : S, :S]


class Scale(nn.Module):
    """A position transform: q and k scaled by a function of their positions (as rotary is one)."""

    positional = True

    def __init__(self, *, identity: bool = False) -> None:
        super().__init__()
        self.identity = identity

    def forward(self, q: torch.Tensor, k: torch.Tensor, offset: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.identity:
            return q, k
        pos = torch.arange(offset, offset + q.size(2), dtype=q.dtype)[:, None]  # (T, 1)
        return q * (1 + 0.1 * pos), k * torch.cos(0.3 * pos)


def padding(lengths: list[int], T: int) -> torch.Tensor:
    return torch.arange(T)[None, :] >= torch.tensor(lengths)[:, None]


def contexts(kind: str) -> list[LayerContext]:
    memory = torch.randn(2, 7, D)
    if kind == "cross":
        return [LayerContext(memory=memory), LayerContext(memory=memory, memory_padding_mask=padding([7, 3], 7))]
    return [LayerContext(), LayerContext(self_padding_mask=padding([6, 4], 6))]


@pytest.mark.parametrize("kind", ["self", "causal_self", "cross"])
def test_a_zero_bias_equals_no_bias(kind):
    x = torch.randn(2, 6, D)
    plain = attention(kind)
    biased = same_weights(plain, attention(kind, score_bias=Bias(torch.zeros(H, 9, 9))))
    for ctx in contexts(kind):
        assert_close(biased(x, ctx), plain(x, ctx))
        assert_close(biased.attention_weights(x, ctx), plain.attention_weights(x, ctx))


@pytest.mark.parametrize("kind", ["self", "causal_self"])
def test_a_minus_infinity_bias_on_some_keys_equals_masking_them(kind):
    x = torch.randn(2, 6, D)
    masked = padding([4, 4], 6)  # keys 4 and 5 of both rows
    table = torch.zeros(H, 9, 9)
    table[:, :, 4:6] = float("-inf")
    plain = attention(kind)
    biased = same_weights(plain, attention(kind, score_bias=Bias(table)))
    # rows 0..3 read no masked key either way (rows 4, 5 of a causal query would read none at all)
    assert_close(biased(x, LayerContext())[:, :4], plain(x, LayerContext(self_padding_mask=masked))[:, :4])


@pytest.mark.parametrize("kind", ["self", "causal_self"])
def test_an_identity_position_transform_changes_nothing(kind):
    x = torch.randn(2, 6, D)
    plain = attention(kind)
    moved = same_weights(plain, attention(kind, positions=Scale(identity=True)))
    for ctx in contexts(kind):
        assert_close(moved(x, ctx), plain(x, ctx))


@pytest.mark.parametrize(
    "seams",
    [
        {"score_bias": Bias(torch.randn(H, 9, 9))},
        {"positions": Scale()},
        {"kv_heads": 2, "score_bias": Bias(torch.randn(1, 9, 9))},
        {"kv_heads": 1, "positions": Scale(), "score_bias": Bias(torch.randn(H, 9, 9))},
    ],
    ids=["bias", "positions", "gqa+bias", "mqa+positions+bias"],
)
@pytest.mark.parametrize("kind", ["self", "causal_self", "cross"])
def test_the_maps_are_the_softmax_of_the_forwards_scores(kind, seams):
    if kind == "cross":
        seams = {k: v for k, v in seams.items() if k != "positions"}
    module = attention(kind, **seams)
    x = torch.randn(2, 6, D)
    for ctx in contexts(kind):
        # the reference: projections, the seams and eq. 1 written out here
        p = {name: (w, b) for name, (w, b) in module.projections().items()}
        source = ctx.memory if kind == "cross" else x
        q = (x @ p["q"][0].T + p["q"][1]).view(2, -1, H, DK).transpose(1, 2)
        k = (source @ p["k"][0].T + p["k"][1]).view(2, -1, module.kv_heads, DK).transpose(1, 2)
        v = (source @ p["v"][0].T + p["v"][1]).view(2, -1, module.kv_heads, DV).transpose(1, 2)
        if "positions" in seams:
            q, k = seams["positions"](q, k, 0)
        group = H // module.kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        T, S = q.size(2), k.size(2)
        scores = (
            q @ k.transpose(-2, -1) / math.sqrt(DK) + seams["score_bias"](T, S)
            if "score_bias" in seams
            else q @ k.transpose(-2, -1) / math.sqrt(DK)
        )
        keys = ctx.memory_padding_mask if kind == "cross" else ctx.self_padding_mask
        if keys is not None:
            scores = scores.masked_fill(keys[:, None, None, :], float("-inf"))
        if kind == "causal_self":
            scores = scores.masked_fill(torch.ones(T, S, dtype=torch.bool).triu(1), float("-inf"))
        weights = scores.softmax(-1)
        assert_close(module.attention_weights(x, ctx), weights)
        out = (weights @ v).transpose(1, 2).reshape(2, T, H * DV) @ p["o"][0].T + p["o"][1]
        assert_close(module(x, ctx), out)


@pytest.mark.parametrize("kv_heads", [1, 2])
@pytest.mark.parametrize("kind", ["self", "causal_self", "cross"])
def test_grouped_kv_heads_equal_full_attention_with_the_kv_heads_repeated(kind, kv_heads):
    grouped = attention(kind, kv_heads=kv_heads)
    full = attention(kind)
    group = H // kv_heads
    with torch.no_grad():
        w = grouped.projections()
        for name in ("k", "v"):
            d = DK if name == "k" else DV
            weight, bias = (t.view(kv_heads, d, *t.shape[1:]).repeat_interleave(group, 0).flatten(0, 1) for t in w[name])
            fused = full.w_kv if kind == "cross" else full.w_qkv
            rows = (
                slice(0, H * DK)
                if kind == "cross" and name == "k"
                else slice(H * DK, 2 * H * DK)
                if name == "k"
                else slice(-H * DV, None)
            )
            fused.weight[rows], fused.bias[rows] = weight, bias
        (full.w_q if kind == "cross" else full.w_qkv).weight[: H * DK] = w["q"][0]
        (full.w_q if kind == "cross" else full.w_qkv).bias[: H * DK] = w["q"][1]
        full.w_o.load_state_dict(grouped.w_o.state_dict())
    x = torch.randn(2, 6, D)
    for ctx in contexts(kind):
        assert_close(grouped(x, ctx), full(x, ctx))
        assert_close(grouped.attention_weights(x, ctx), full.attention_weights(x, ctx))


@pytest.mark.parametrize("seams", [{"kv_heads": 2}, {"positions": Scale()}, {"score_bias": Bias(torch.randn(H, 9, 9))},
                                   {"kv_heads": 1, "positions": Scale(), "score_bias": Bias(torch.randn(1, 9, 9))}],
                         ids=["gqa", "positions", "bias", "all"])  # fmt: skip
def test_incremental_decoding_with_the_seams_equals_the_full_pass(seams):
    module = attention("causal_self", **seams)
    x = torch.randn(2, 7, D)
    full = module(x, LayerContext())
    state = DecoderState()
    steps = []
    for start, end in ((0, 1), (1, 4), (4, 5), (5, 7)):  # one and several tokens per call
        steps.append(module(x[:, start:end], LayerContext(state=state)))
        state.advance(end - start)
    assert_close(torch.cat(steps, dim=1), full)
    cached = state.cache(module)["k"]
    assert cached.shape == (2, seams.get("kv_heads", H), 7, DK)  # the cache holds only the K/V heads


def test_the_stack_hands_its_bias_to_its_self_attentions_only():
    table = torch.randn(H, 9, 9)
    shared = Bias(table)
    own = [attention("causal_self", seed=1, score_bias=Bias(table)), attention("cross", seed=2)]
    plain = [same_weights(own[0], attention("causal_self")), same_weights(own[1], attention("cross"))]
    with_own = TransformerStack(layers=[TransformerLayer(sublayers=own)])
    with_shared = TransformerStack(layers=[TransformerLayer(sublayers=plain)], position_bias=shared)
    x, ctx = torch.randn(2, 6, D), LayerContext(memory=torch.randn(2, 7, D))
    assert_close(with_shared(x, ctx), with_own(x, ctx))
    assert ctx.position_bias is None  # the caller's context is left as it was


def test_seam_messages():
    with pytest.raises(ValueError, match=r"^kv_heads \(3\) must divide h \(4\): each K/V head serves h / kv_heads query heads$"):
        attention_of("self", d_model=D, h=4, d_k=4, d_v=4, kv_heads=3)
    with pytest.raises(ValueError, match=r"^kv_heads \(0\) must be >= 1$"):
        attention_of("self", d_model=D, h=4, d_k=4, d_v=4, kv_heads=0)
    with pytest.raises(
        ValueError,
        match=r"^Scale turns queries and keys by their positions in one sequence, but cross-attention takes "
        r"its keys from the encoder memory; give it to self-attention$",
    ):
        attention_of("cross", d_model=D, h=4, d_k=4, d_v=4, qk=[Scale()])
    assert "kv_heads=2" in repr(attention_of("self", d_model=D, h=4, d_k=4, d_v=4, kv_heads=2))

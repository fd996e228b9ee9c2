"""MultiHeadAttention: parity with torch.nn.MultiheadAttention, free d_k/d_v, masks, attention weights."""

import math

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from aiayn.blocks import CausalMask, DecoderState, LayerContext, MultiHeadAttention, PackedRows
from tests.models import attention_from_torch, attention_of

D_MODEL, H = 16, 4


def _reference(*, need_weights_dropout: float = 0.0) -> nn.MultiheadAttention:
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(D_MODEL, H, batch_first=True, dropout=need_weights_dropout)
    # torch initialises in_proj_bias to zeros; random biases make the copy check meaningful
    nn.init.normal_(ref.in_proj_bias)
    nn.init.normal_(ref.out_proj.bias)
    return ref.eval()


def _ours_from(ref: nn.MultiheadAttention, kind: str) -> MultiHeadAttention:
    return attention_from_torch(ref, kind).eval()


def _padding(lengths: list[int], T: int) -> torch.Tensor:
    return torch.arange(T)[None, :] >= torch.tensor(lengths)[:, None]  # (B, T) True at padding


def test_self_attention_matches_torch_with_key_padding():
    ref = _reference()
    ours = _ours_from(ref, "self")
    x = torch.randn(3, 7, D_MODEL)
    pad = _padding([7, 4, 2], 7)
    expected, _ = ref(x, x, x, key_padding_mask=pad, need_weights=False)
    assert_close(ours(x, LayerContext(self_padding_mask=pad)), expected)
    assert_close(ours(x, LayerContext()), ref(x, x, x, need_weights=False)[0])


def test_causal_self_attention_matches_torch_with_attn_mask_and_padding():
    ref = _reference()
    ours = _ours_from(ref, "causal_self")
    x = torch.randn(3, 6, D_MODEL)
    future = torch.ones(6, 6, dtype=torch.bool).triu(1)  # True = may not attend
    pad = _padding([6, 5, 3], 6)
    expected, _ = ref(x, x, x, attn_mask=future, key_padding_mask=pad, need_weights=False)
    assert_close(ours(x, LayerContext(self_padding_mask=pad)), expected)
    # no padding: the is_causal fast path
    expected, _ = ref(x, x, x, attn_mask=future, need_weights=False)
    assert_close(ours(x, LayerContext()), expected)


def test_cross_attention_matches_torch_with_memory_padding():
    ref = _reference()
    ours = _ours_from(ref, "cross")
    x, memory = torch.randn(2, 5, D_MODEL), torch.randn(2, 9, D_MODEL)
    mem_pad = _padding([9, 4], 9)
    expected, _ = ref(x, memory, memory, key_padding_mask=mem_pad, need_weights=False)
    assert_close(ours(x, LayerContext(memory=memory, memory_padding_mask=mem_pad)), expected)


def test_free_d_k_d_v_matches_equation_one_per_head():
    torch.manual_seed(1)
    d_model, h, d_k, d_v = 8, 3, 5, 2  # h*d_k != d_model on purpose (Table 3 rows A, B)
    attn = attention_of("self", d_model=d_model, h=h, d_k=d_k, d_v=d_v).eval()
    assert attn.w_qkv.weight.shape == (h * (2 * d_k + d_v), d_model)
    assert attn.w_o.weight.shape == (d_model, h * d_v)
    x = torch.randn(2, 4, d_model)
    q, k, v = attn.w_qkv(x).split([h * d_k, h * d_k, h * d_v], dim=-1)
    heads = []
    for i in range(h):
        qi, ki = q[..., i * d_k : (i + 1) * d_k], k[..., i * d_k : (i + 1) * d_k]
        vi = v[..., i * d_v : (i + 1) * d_v]
        heads.append(torch.softmax(qi @ ki.transpose(1, 2) / math.sqrt(d_k), dim=-1) @ vi)
    expected = attn.w_o(torch.cat(heads, dim=-1))
    assert_close(attn(x, LayerContext()), expected)


@pytest.mark.parametrize("kind", ["self", "causal_self", "cross"])
def test_attention_weights_match_torch(kind):
    ref = _reference()
    ours = _ours_from(ref, kind)
    x = torch.randn(3, 6, D_MODEL)
    memory = torch.randn(3, 8, D_MODEL) if kind == "cross" else x
    pad = _padding([8, 5, 2], 8) if kind == "cross" else _padding([6, 4, 3], 6)
    ctx = LayerContext(memory=memory, memory_padding_mask=pad) if kind == "cross" else LayerContext(self_padding_mask=pad)
    w = ours.attention_weights(x, ctx)
    assert w.shape == (3, H, 6, memory.size(1))
    assert_close(w.sum(-1), torch.ones(3, H, 6))
    assert torch.all(w.masked_select(pad[:, None, None, :].expand_as(w)) == 0)
    future = torch.ones(6, 6, dtype=torch.bool).triu(1) if kind == "causal_self" else None
    _, ref_w = ref(x, memory, memory, key_padding_mask=pad, attn_mask=future, average_attn_weights=False)
    assert_close(w, ref_w)
    if kind == "causal_self":
        assert torch.all(w[..., future] == 0)


def test_attention_weights_on_causal_fast_path_are_lower_triangular():
    attn = attention_of("causal_self", d_model=D_MODEL, h=H, d_k=4, d_v=4).eval()
    w = attn.attention_weights(torch.randn(2, 5, D_MODEL), LayerContext())
    assert torch.all(w.triu(1) == 0)
    assert_close(w.sum(-1), torch.ones(2, H, 5))


def test_attention_dropout_only_in_training():
    torch.manual_seed(0)
    attn = attention_of("self", d_model=D_MODEL, h=H, d_k=4, d_v=4, attn_dropout=0.5)
    x = torch.randn(2, 5, D_MODEL)
    attn.eval()
    assert torch.equal(attn(x, LayerContext()), attn(x, LayerContext()))
    attn.train()
    assert not torch.allclose(attn(x, LayerContext()), attn(x, LayerContext()))


def test_incremental_causal_attention_matches_full_pass_one_and_many_tokens_per_step():
    torch.manual_seed(0)
    attn = attention_of("causal_self", d_model=D_MODEL, h=H, d_k=3, d_v=5).eval()
    x = torch.randn(2, 7, D_MODEL)
    full = attn(x, LayerContext())
    state = DecoderState()
    steps = [attn(x[:, :1], LayerContext(state=state))]  # one token
    steps.append(attn(x[:, 1:4], LayerContext(state=state)))  # three at once: causal within the chunk
    steps += [attn(x[:, t : t + 1], LayerContext(state=state)) for t in range(4, 7)]
    assert_close(torch.cat(steps, dim=1), full)
    assert state.cache(attn)["k"].shape == (2, H, 7, 3)


def test_incremental_causal_attention_keeps_padding_of_past_keys():
    torch.manual_seed(0)
    attn = attention_of("causal_self", d_model=D_MODEL, h=H, d_k=4, d_v=4).eval()
    x = torch.randn(2, 5, D_MODEL)
    pad = torch.tensor([[False, True, False, False, False], [False] * 5])  # a padded key in the middle
    full = attn(x, LayerContext(self_padding_mask=pad))
    state = DecoderState()
    steps = [attn(x[:, t : t + 1], LayerContext(self_padding_mask=pad[:, t : t + 1], state=state)) for t in range(5)]
    assert_close(torch.cat(steps, dim=1), full)


def test_cross_attention_projects_memory_once_per_state():
    attn = attention_of("cross", d_model=D_MODEL, h=H, d_k=4, d_v=4).eval()
    calls = []
    attn.w_kv.register_forward_hook(lambda *args: calls.append(1))
    memory, state = torch.randn(2, 6, D_MODEL), DecoderState()
    for _ in range(3):
        attn(torch.randn(2, 1, D_MODEL), LayerContext(memory=memory, state=state))
    assert len(calls) == 1


def test_decoder_state_reorder_selects_batch_rows():
    attn = attention_of("causal_self", d_model=D_MODEL, h=H, d_k=4, d_v=4).eval()
    state = DecoderState()
    attn(torch.randn(3, 2, D_MODEL), LayerContext(state=state))
    before = state.cache(attn)["k"].clone()
    state.reorder(torch.tensor([2, 2, 0]))
    assert torch.equal(state.cache(attn)["k"], before[[2, 2, 0]])
    state.reorder(torch.tensor([1]))
    assert torch.equal(state.cache(attn)["k"], before[[2]])


def test_constructor_and_misuse_messages():
    with pytest.raises(ValueError, match=r"^window \(0\) must be >= 1: a query reads at least itself$"):
        CausalMask(window=0)
    with pytest.raises(ValueError, match=r"^h \(0\) must be >= 1$"):
        attention_of("self", d_model=8, h=0, d_k=4, d_v=4)
    with pytest.raises(ValueError, match=r"^attn_dropout \(1.5\) must be in \[0, 1\)$"):
        attention_of("self", d_model=8, h=2, d_k=4, d_v=4, attn_dropout=1.5)
    cross = attention_of("cross", d_model=8, h=2, d_k=4, d_v=4)
    with pytest.raises(ValueError, match=r"^cross-attention needs the encoder output in ctx.memory, got None$"):
        cross(torch.randn(1, 2, 8), LayerContext())
    bidirectional = attention_of("self", d_model=8, h=2, d_k=4, d_v=4)
    with pytest.raises(
        ValueError, match=r"^incremental decoding needs a causal mask: a self-attention whose queries read later positions"
    ):
        bidirectional(torch.randn(1, 2, 8), LayerContext(state=DecoderState()))
    with pytest.raises(ValueError, match=r"^indices must be 1-D, got shape \(2, 1\)$"):
        DecoderState().reorder(torch.zeros(2, 1, dtype=torch.long))


def test_packed_rows_need_causal_self_attention_or_a_padding_mask():
    attention = attention_of("self", d_model=8, h=2, d_k=4, d_v=4)
    packed = PackedRows(torch.tensor([0, 1, 3]), batch=2, length=2)
    with pytest.raises(ValueError, match=(
        r"^packed rows need a causal mask \(its queries never read the rows left out\) or a self_padding_mask that "
        r"masks them; this self-attention has neither$"
    )):  # fmt: skip
        attention(torch.randn(3, 8), LayerContext(packed=packed))


def test_packed_rows_with_their_padding_mask_equal_the_padded_rows():
    torch.manual_seed(0)
    attention = attention_of("self", d_model=8, h=2, d_k=4, d_v=4).eval()
    x = torch.randn(2, 3, 8)
    padding = torch.tensor([[False, False, False], [False, True, True]])
    packed = PackedRows(torch.tensor([0, 1, 2, 3]), batch=2, length=3)
    full = attention(x, LayerContext(self_padding_mask=padding))
    rows = attention(packed.pack(x), LayerContext(self_padding_mask=padding, packed=packed))
    assert_close(rows, packed.pack(full))

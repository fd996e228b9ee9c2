"""The score step handed to attention (blocks/score.py): the forward and `attention_weights` are
one path for every built-in step (the weights times V, then W^O); the softmax's SDPA forward is
the same numbers; softcap is transformers' Gemma 2 attention on copied tensors; sigmoid attention
is Ramapuram et al.'s formula written out, with its -log n bias per query."""

import math

import pytest
import torch
from torch.testing import assert_close

from aiayn.blocks import CausalMask, LayerContext, ScoreStep, SelfAttention, Sigmoid, Softmax
from aiayn.blocks.position_bias import AlibiBias

STEPS = {
    "softmax": lambda: Softmax(),
    "softmax_softcap": lambda: Softmax(softcap=0.8),
    "sigmoid": lambda: Sigmoid(),
    "sigmoid_bias": lambda: Sigmoid(bias=-2.0),
    "sigmoid_softcap": lambda: Sigmoid(softcap=1.5),
}
PADDING = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])


def attention(step: ScoreStep, **parts) -> SelfAttention:
    torch.manual_seed(0)
    return SelfAttention(d_model=16, h=4, d_k=4, d_v=6, score=step, **parts).eval()


@pytest.mark.parametrize("name", sorted(STEPS))
@pytest.mark.parametrize(
    "parts", [{}, {"mask": CausalMask()}, {"mask": CausalMask(window=2), "kv_heads": 2}, {"score_bias": AlibiBias(h=4)}], ids=["all", "causal", "window_gqa", "bias"]
)  # fmt: skip
def test_the_forward_is_the_weights_attention_weights_returns(name, parts):
    module = attention(STEPS[name](), **parts)
    x = torch.randn(2, 6, 16)
    for ctx in (LayerContext(), LayerContext(self_padding_mask=PADDING)):
        weights = module.attention_weights(x, ctx)  # (B, h, T, S)
        p = module.projections()
        v = (
            (x @ p["v"][0].T + p["v"][1])
            .view(2, 6, module.kv_heads, 6)
            .transpose(1, 2)
            .repeat_interleave(4 // module.kv_heads, dim=1)
        )
        out = (weights @ v).transpose(1, 2).reshape(2, 6, 24) @ p["o"][0].T + p["o"][1]
        real = ~PADDING if ctx.self_padding_mask is not None else torch.ones(2, 6, dtype=torch.bool)
        assert_close(module(x, ctx)[real], out[real])  # a padded query whose window holds only padding reads nothing


def test_softcap_is_gemma_2s_attention_on_copied_tensors():
    gemma2 = pytest.importorskip("transformers.models.gemma2.modeling_gemma2")
    torch.manual_seed(1)
    q, k, v = torch.randn(2, 4, 5, 8) * 3, torch.randn(2, 2, 7, 8) * 3, torch.randn(2, 2, 7, 8)  # GQA: 2 K/V heads
    bias = torch.zeros(2, 1, 5, 7).masked_fill(torch.rand(2, 1, 5, 7) < 0.3, float("-inf"))
    bias[..., 0] = 0.0  # every query reads a key

    class Module(torch.nn.Module):
        num_key_value_groups, head_dim = 2, 8

    reference, ref_weights = gemma2.eager_attention_forward(Module().eval(), q, k, v, bias, softcap=50.0 / 20)
    step = Softmax(softcap=50.0 / 20)
    assert_close(step.attend(q, k, v, bias, False, 0.0).transpose(1, 2), reference)
    assert_close(step.weights(q, k, bias, False), ref_weights)


def test_sigmoid_attention_is_the_formula_with_minus_log_n_per_query():
    torch.manual_seed(2)
    q, k = torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8)
    scores = q @ k.transpose(-2, -1) / math.sqrt(8)
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    n = torch.arange(1, 5, dtype=torch.float32)[:, None]  # query i reads i + 1 keys
    expected = torch.sigmoid(scores - torch.log(n)) * causal
    assert_close(Sigmoid().weights(q, k, None, True), expected)
    assert_close(Sigmoid().weights(q, k, None, False), torch.sigmoid(scores - math.log(4)))
    padding = torch.tensor([[True, True, True, False]])[:, None, None, :]  # the last key padded: n = 3
    assert_close(Sigmoid().weights(q, k, padding, False), torch.sigmoid(scores - math.log(3)) * padding)
    assert_close(Sigmoid(bias=-1.0).weights(q, k, None, False), torch.sigmoid(scores - 1.0))


def test_the_softmax_takes_sdpa_where_nothing_touches_its_scores(monkeypatch):
    calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or sdpa(*a, **k))
    x = torch.randn(2, 6, 16)
    attention(Softmax())(x, LayerContext())
    assert calls == [1]
    attention(Softmax(softcap=2.0))(x, LayerContext())
    attention(Sigmoid())(x, LayerContext())
    assert calls == [1]


def test_a_softcap_that_is_not_positive_is_refused():
    with pytest.raises(ValueError, match=r"^softcap \(0\) must be > 0: scores are capped to \(-softcap, softcap\)$"):
        Softmax(softcap=0)
    assert repr(Sigmoid(softcap=50)) == "Sigmoid(bias=-log n, softcap=50)"

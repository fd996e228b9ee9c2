"""AddNorm, feed-forward, layers and stacks: parity with torch.nn.TransformerEncoderLayer/DecoderLayer."""

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from aiayn.blocks import (
    AddNorm,
    Dropout,
    LayerContext,
    PositionwiseFeedForward,
    TransformerLayer,
    TransformerStack,
)
from tests.models import attention_from_torch

D_MODEL, H, D_FF, EPS = 16, 4, 32, 1e-5


@pytest.fixture(autouse=True)
def _no_torch_fastpath():
    # torch's eval fast path returns zeros at padded positions; compare against the plain math
    enabled = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    yield
    torch.backends.mha.set_fastpath_enabled(enabled)


def _randomise(module: nn.Module) -> nn.Module:
    torch.manual_seed(0)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * 0.3)  # LayerNorm and biases too, so every copy matters
    return module.eval()


def _ffn(ref: nn.Module) -> PositionwiseFeedForward:
    ours = PositionwiseFeedForward(d_model=D_MODEL, d_ff=D_FF, activation=nn.ReLU())
    ours.w_1.load_state_dict(ref.linear1.state_dict())
    ours.w_2.load_state_dict(ref.linear2.state_dict())
    return ours


def _add_norm(sublayer: nn.Module, norm: nn.LayerNorm, norm_first: bool) -> AddNorm:
    wrapped = AddNorm(sublayer=sublayer, norm=nn.LayerNorm(D_MODEL, eps=EPS), dropout=0.1, norm_first=norm_first)
    wrapped.norm.load_state_dict(norm.state_dict())
    return wrapped


def _encoder_layer_from(ref: nn.TransformerEncoderLayer, norm_first: bool) -> TransformerLayer:
    return TransformerLayer(
        sublayers=[
            _add_norm(attention_from_torch(ref.self_attn, "self"), ref.norm1, norm_first),
            _add_norm(_ffn(ref), ref.norm2, norm_first),
        ]
    ).eval()


def _decoder_layer_from(ref: nn.TransformerDecoderLayer, norm_first: bool) -> TransformerLayer:
    return TransformerLayer(
        sublayers=[
            _add_norm(attention_from_torch(ref.self_attn, "causal_self"), ref.norm1, norm_first),
            _add_norm(attention_from_torch(ref.multihead_attn, "cross"), ref.norm2, norm_first),
            _add_norm(_ffn(ref), ref.norm3, norm_first),
        ]
    ).eval()


def _padding(lengths: list[int], T: int) -> torch.Tensor:
    return torch.arange(T)[None, :] >= torch.tensor(lengths)[:, None]


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
def test_encoder_layer_matches_torch(norm_first):
    ref = _randomise(
        nn.TransformerEncoderLayer(
            D_MODEL,
            H,
            D_FF,
            dropout=0.1,
            activation="relu",
            layer_norm_eps=EPS,
            batch_first=True,
            norm_first=norm_first,
        )
    )
    ours = _encoder_layer_from(ref, norm_first)
    x = torch.randn(3, 7, D_MODEL)
    pad = _padding([7, 5, 2], 7)
    expected = ref(x, src_key_padding_mask=pad)
    assert_close(ours(x, LayerContext(self_padding_mask=pad)), expected)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
def test_decoder_layer_matches_torch(norm_first):
    ref = _randomise(
        nn.TransformerDecoderLayer(
            D_MODEL,
            H,
            D_FF,
            dropout=0.1,
            activation="relu",
            layer_norm_eps=EPS,
            batch_first=True,
            norm_first=norm_first,
        )
    )
    ours = _decoder_layer_from(ref, norm_first)
    x, memory = torch.randn(3, 6, D_MODEL), torch.randn(3, 8, D_MODEL)
    tgt_pad, mem_pad = _padding([6, 6, 4], 6), _padding([8, 3, 5], 8)
    causal = torch.ones(6, 6, dtype=torch.bool).triu(1)  # True = may not attend
    expected = ref(x, memory, tgt_mask=causal, tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=mem_pad)
    ctx = LayerContext(self_padding_mask=tgt_pad, memory=memory, memory_padding_mask=mem_pad)
    assert_close(ours(x, ctx), expected)


def test_pre_norm_stack_with_final_norm_matches_torch_encoder():
    ref_layer = nn.TransformerEncoderLayer(D_MODEL, H, D_FF, dropout=0.0, layer_norm_eps=EPS, batch_first=True, norm_first=True)
    ref = _randomise(
        nn.TransformerEncoder(ref_layer, num_layers=2, norm=nn.LayerNorm(D_MODEL, eps=EPS), enable_nested_tensor=False)
    )
    final_norm = nn.LayerNorm(D_MODEL, eps=EPS)
    final_norm.load_state_dict(ref.norm.state_dict())
    ours = TransformerStack(
        layers=[_encoder_layer_from(layer, norm_first=True) for layer in ref.layers], final_norm=final_norm
    ).eval()
    x, pad = torch.randn(2, 5, D_MODEL), _padding([5, 3], 5)
    assert_close(ours(x, LayerContext(self_padding_mask=pad)), ref(x, src_key_padding_mask=pad))


def test_feed_forward_is_equation_two():
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(d_model=4, d_ff=6, activation=nn.ReLU()).eval()
    x = torch.randn(2, 3, 4)
    w1, b1, w2, b2 = ffn.w_1.weight, ffn.w_1.bias, ffn.w_2.weight, ffn.w_2.bias
    expected = torch.clamp(x @ w1.T + b1, min=0) @ w2.T + b2
    assert_close(ffn(x, LayerContext()), expected)
    assert sum(p.numel() for p in ffn.parameters()) == 4 * 6 + 6 + 6 * 4 + 4
    no_bias = PositionwiseFeedForward(d_model=4, d_ff=6, activation=nn.ReLU(), bias=False)
    assert sum(p.numel() for p in no_bias.parameters()) == 4 * 6 + 6 * 4


def test_add_norm_applies_dropout_to_the_sublayer_output_only_in_training():
    class Constant(nn.Module):
        def forward(self, x, ctx):
            return torch.ones_like(x)

    block = AddNorm(sublayer=Constant(), norm=nn.LayerNorm(8, eps=EPS), dropout=0.5)
    x = torch.randn(2, 3, 8)
    assert_close(block.eval()(x, LayerContext()), nn.functional.layer_norm(x + 1, (8,), eps=EPS))
    torch.manual_seed(0)
    dropped = block.train()(x, LayerContext())
    torch.manual_seed(0)
    kept = Dropout(0.5).train()(torch.ones_like(x))  # the same draws: the same mask
    assert_close(dropped, nn.functional.layer_norm(x + kept, (8,), eps=EPS))


def test_constructor_messages():
    with pytest.raises(ValueError, match=r"^sublayers is empty: a layer needs at least one sub-layer$"):
        TransformerLayer(sublayers=[])
    with pytest.raises(ValueError, match=r"^layers is empty: a stack needs at least one layer \(N >= 1\)$"):
        TransformerStack(layers=[])
    with pytest.raises(ValueError, match=r"^dropout \(1.0\) must be in \[0, 1\)$"):
        AddNorm(sublayer=nn.Identity(), norm=nn.LayerNorm(8), dropout=1.0)
    with pytest.raises(ValueError, match=r"^d_ff \(0\) must be >= 1$"):
        PositionwiseFeedForward(d_model=8, d_ff=0, activation=nn.ReLU())
    with pytest.raises(ValueError, match=r"^activation_dropout \(-0.1\) must be in \[0, 1\)$"):
        PositionwiseFeedForward(d_model=8, d_ff=8, activation=nn.ReLU(), activation_dropout=-0.1)

"""Positions (Sec 3.5, Table 3 row E), scaled embeddings and the tied output projection (Sec 3.4)."""

import math

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from aiayn.blocks import (
    InputEmbedding,
    LearnedPositionalEmbedding,
    OutputProjection,
    ScaledEmbedding,
    SinusoidalPositionalEncoding,
)


def _paper_table(n: int, d_model: int, layout: str) -> torch.Tensor:
    rows = []
    for pos in range(n):
        sines = [math.sin(pos / 10000 ** (2 * i / d_model)) for i in range(d_model // 2)]
        cosines = [math.cos(pos / 10000 ** (2 * i / d_model)) for i in range(d_model // 2)]
        if layout == "interleaved":
            rows.append([v for pair in zip(sines, cosines) for v in pair])
        else:
            rows.append(sines + cosines)
    return torch.tensor(rows, dtype=torch.float32)


@pytest.mark.parametrize("layout", ["interleaved", "concatenated"])
def test_sinusoid_table_is_the_closed_form(layout):
    pe = SinusoidalPositionalEncoding(d_model=12, layout=layout)
    assert_close(pe(300), _paper_table(300, 12, layout))
    assert_close(pe(5, offset=250), _paper_table(255, 12, layout)[250:])
    assert list(pe.parameters()) == []
    assert pe.state_dict() == {}  # non-persistent: checkpoints do not carry the table


def test_sinusoid_spot_values():
    pe = SinusoidalPositionalEncoding(d_model=4)(3)
    # pos 2: i=0 -> sin(2), cos(2); i=1 -> sin(2/100), cos(2/100)
    assert_close(pe[2], torch.tensor([math.sin(2), math.cos(2), math.sin(0.02), math.cos(0.02)]))


def test_sinusoids_past_the_table_are_computed_and_not_kept():
    pe = SinusoidalPositionalEncoding(d_model=8, max_len=16)
    long = pe(10, offset=990)
    assert pe.table.shape == (16, 8)  # a fixed size: every DDP rank holds the same buffer
    assert_close(long, _paper_table(1000, 8, "interleaved")[990:])
    assert_close(pe(20), _paper_table(20, 8, "interleaved"))  # across the table's end


def test_sinusoid_table_is_a_non_persistent_buffer_that_follows_the_module():
    pe = SinusoidalPositionalEncoding(d_model=8).to(torch.float64)
    assert [name for name, _ in pe.named_buffers()] == ["table"] and list(pe.parameters()) == []
    assert pe(3).dtype == torch.float64 and pe.state_dict() == {}


def test_sinusoid_messages():
    with pytest.raises(ValueError, match=r"^d_model \(511\) must be divisible by 2 for sinusoidal positions$"):
        SinusoidalPositionalEncoding(d_model=511)
    with pytest.raises(ValueError, match=r"^layout \('stacked'\) must be one of \('interleaved', 'concatenated'\)$"):
        SinusoidalPositionalEncoding(d_model=8, layout="stacked")


def test_learned_positions_rows_and_error_text():
    learned = LearnedPositionalEmbedding(max_len=6, d_model=4)
    assert_close(learned(3, offset=2), learned.table.weight[2:5])
    assert learned(6).shape == (6, 4)
    message = "position 7 requested but learned positions cover only 0..5 (max_len=6); raise max_len or shorten the input"
    with pytest.raises(ValueError) as error:
        learned(3, offset=5)
    assert str(error.value) == message


def test_scaled_embedding_multiplies_by_sqrt_d_model():
    table = nn.Embedding(10, 16)
    tokens = torch.tensor([[1, 2, 3]])
    assert_close(ScaledEmbedding(table=table, scale=True)(tokens), table(tokens) * 4.0)
    assert_close(ScaledEmbedding(table=table, scale=False)(tokens), table(tokens))


def test_input_embedding_adds_positions_from_offset():
    table = nn.Embedding(10, 8)
    positional = SinusoidalPositionalEncoding(d_model=8)
    embed = InputEmbedding(token=ScaledEmbedding(table=table, scale=True), positional=positional, dropout=0.1).eval()
    tokens = torch.tensor([[4, 5], [6, 7]])
    expected = table(tokens) * math.sqrt(8) + _paper_table(5, 8, "interleaved")[3:5]
    assert_close(embed(tokens, offset=3), expected)


def test_output_projection_tied_uses_the_same_parameter():
    table = nn.Embedding(11, 6)
    proj = OutputProjection(d_model=6, vocab_size=11, tied_weight=table.weight)
    assert proj.weight is table.weight
    x = torch.randn(2, 3, 6)
    assert_close(proj(x), x @ table.weight.T)
    both = nn.ModuleList([table, proj])
    assert sum(p.numel() for p in both.parameters()) == 11 * 6
    untied = OutputProjection(d_model=6, vocab_size=11, bias=True)
    assert sum(p.numel() for p in untied.parameters()) == 11 * 6 + 11


def test_output_projection_tied_shape_message():
    with pytest.raises(ValueError) as error:
        OutputProjection(d_model=6, vocab_size=12, tied_weight=nn.Embedding(11, 6).weight)
    assert str(error.value) == ("tied_weight has shape (11, 6) but the projection needs (vocab_size, d_model) = (12, 6)")

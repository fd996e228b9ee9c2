"""EncoderDecoder: incremental decoding equals teacher forcing, reorder, exact parameter counts."""

import pytest
import torch
from torch.testing import assert_close

from aiayn.blocks import (
    DecoderState,
    EncoderDecoder,
)
from tests.models import tiny_model

PAD = 0
make_model = tiny_model


def _batch():
    g = torch.Generator().manual_seed(3)
    src = torch.randint(1, 13, (3, 7), generator=g)
    src[1, 5:] = PAD
    src[2, 3:] = PAD
    tgt = torch.randint(1, 13, (3, 6), generator=g)
    return src, tgt


@pytest.mark.parametrize(
    "options",
    [{}, {"norm_first": True}, {"learned_positions": True}],
    ids=["post_norm", "pre_norm", "learned_positions"],
)
def test_incremental_decoding_equals_teacher_forcing(options):
    torch.manual_seed(0)
    model = make_model(**options).eval()
    src, tgt = _batch()
    full = model(src, tgt)  # (B, T, V)
    memory, src_pad = model.encode(src)
    state = model.init_state()
    steps = [model.decode(tgt[:, t : t + 1], memory, src_pad, state) for t in range(tgt.size(1))]
    assert state.length == tgt.size(1)
    assert_close(torch.cat(steps, dim=1), full)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
def test_logits_of_packed_rows_are_those_rows_of_the_full_logits(norm_first):
    # the decoder computes only these rows (a prefix of each target), as a right-padded target's tokens
    torch.manual_seed(0)
    model = make_model(norm_first=norm_first).eval()
    src, tgt = _batch()
    rows = torch.tensor([0, 1, 2, 6, 7, 12, 13, 14, 15, 16, 17])  # flat indices into (3, 6): 3, 2 and 6 per row
    assert_close(model(src, tgt, rows), model(src, tgt).flatten(0, 1)[rows])


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
def test_packed_source_gives_the_logits_of_the_padded_one(norm_first):
    # the encoder computes only the non-padding sources; the decoder reads the packed memory
    torch.manual_seed(0)
    model = make_model(norm_first=norm_first).eval()
    src, tgt = _batch()  # sources of 7, 5 and 3 tokens in (3, 7)
    src_rows = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 14, 15, 16])
    rows = torch.tensor([0, 1, 2, 6, 7, 12, 13, 14, 15, 16, 17])
    assert model.encoded_rows(src, src_rows) is not None
    memory, padding = model.encode(src, src_rows)
    assert memory.shape == (15, 8) and torch.equal(padding, src.eq(PAD))
    assert_close(model(src, tgt, None, src_rows), model(src, tgt))
    assert_close(model(src, tgt, rows, src_rows), model(src, tgt).flatten(0, 1)[rows])


def test_a_source_without_padding_is_encoded_without_a_mask():
    torch.manual_seed(0)
    model = make_model().eval()
    src, tgt = _batch()
    src = src.clamp(min=1)  # no padding
    every = torch.arange(src.numel())
    assert model.encoded_rows(src, every) is None
    memory, padding = model.encode(src, every)
    assert padding is None and memory.shape == (3, 7, 8)
    assert_close(model(src, tgt, None, every), model(src, tgt))


def test_rows_and_incremental_state_are_exclusive():
    model = make_model().eval()
    src, tgt = _batch()
    memory, src_pad = model.encode(src)
    with pytest.raises(ValueError, match=r"^rows select rows of a whole teacher-forced target: call decode without state$"):
        model.decode(tgt, memory, src_pad, model.init_state(), rows=torch.tensor([0]))


def test_incremental_decoding_with_several_tokens_per_call():
    torch.manual_seed(0)
    model = make_model().eval()
    src, tgt = _batch()
    full = model(src, tgt)
    memory, src_pad = model.encode(src)
    state = model.init_state()
    chunks = [model.decode(tgt[:, :2], memory, src_pad, state), model.decode(tgt[:, 2:], memory, src_pad, state)]
    assert_close(torch.cat(chunks, dim=1), full)


def test_reorder_follows_selected_rows():
    torch.manual_seed(0)
    model = make_model().eval()
    src, tgt = _batch()
    memory, src_pad = model.encode(src)
    state = model.init_state()
    model.decode(tgt[:, :3], memory, src_pad, state)
    order = torch.tensor([2, 0, 2])  # duplicate one row and drop another, as beam search does
    state.reorder(order)
    last = model.decode(tgt[order, 3:4], memory[order], src_pad[order], state)
    assert_close(last[:, 0], model(src[order], tgt[order, :4])[:, 3])


def test_padding_is_masked_everywhere():
    torch.manual_seed(0)
    model = make_model().eval()
    src, tgt = _batch()
    src[0, 2] = PAD  # padding in the middle of a source: no query may see it
    tgt[0, 4:] = PAD  # targets are right-padded (the collator's layout): the causal mask hides it
    tgt[2, 5:] = PAD
    real = tgt.ne(PAD)
    before = model(src, tgt)
    with torch.no_grad():
        model.src_embed.token.table.weight[PAD].normal_()  # a different PAD vector, everywhere
    after = model(src, tgt)
    # logits of real positions over real tokens cannot depend on what PAD embeds to
    assert_close(after[real][:, 1:], before[real][:, 1:])
    assert not torch.allclose(after[~real], before[~real])


def test_source_padding_does_not_leak():
    torch.manual_seed(0)
    model = make_model().eval()
    src, tgt = _batch()
    longer = torch.cat([src, torch.full((3, 4), PAD)], dim=1)  # extra padding columns
    assert_close(model(longer, tgt), model(src, tgt))


def test_tied_parameter_count_by_hand():
    model = make_model(vocab=13, d_model=8, h=2, d_k=3, d_v=5, d_ff=16, n_enc=2, n_dec=2)
    d, V = 8, 13
    layer_norm = 2 * d
    self_attn = (d * 2 * (2 * 3 + 5) + 2 * (2 * 3 + 5)) + (2 * 5 * d + d)  # fused W^Q,K,V + W^O
    cross_attn = (d * 2 * 3 + 2 * 3) + (d * 2 * (3 + 5) + 2 * (3 + 5)) + (2 * 5 * d + d)
    ffn = (d * 16 + 16) + (16 * d + d)
    encoder_layer = self_attn + layer_norm + ffn + layer_norm
    decoder_layer = self_attn + layer_norm + cross_attn + layer_norm + ffn + layer_norm
    shared_table = V * d  # source, target and output projection: counted once, no output bias
    expected = shared_table + 2 * encoder_layer + 2 * decoder_layer
    assert (self_attn, cross_attn, ffn) == (286, 286, 280)
    assert expected == 104 + 2 * 598 + 2 * 900 == 3100
    assert sum(p.numel() for p in model.parameters()) == expected
    assert model.generator.weight is model.src_embed.token.table.weight


def test_paper_base_model_has_63_082_496_parameters():
    with torch.device("meta"):
        model = make_model(vocab=37000, d_model=512, h=8, d_k=64, d_v=64, d_ff=2048, n_enc=6, n_dec=6)
    assert sum(p.numel() for p in model.parameters()) == 63_082_496


def test_pad_id_message():
    model = make_model()
    with pytest.raises(ValueError, match=r"^pad_id \(-1\) must be a token id >= 0$"):
        EncoderDecoder(
            src_embed=model.src_embed,
            tgt_embed=model.tgt_embed,
            encoder=model.encoder,
            decoder=model.decoder,
            generator=model.generator,
            pad_id=-1,
        )


def test_init_state_is_fresh():
    model = make_model()
    first, second = model.init_state(), model.init_state()
    assert isinstance(first, DecoderState) and first is not second and first.length == 0

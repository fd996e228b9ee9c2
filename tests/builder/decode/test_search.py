"""Beam search, and greedy as beam 1: cached == uncached, beam 1 == the plain greedy loop, length limits, a known output."""

import math

import pytest
import torch
from torch import nn

from aiayn.blocks import (
    EncoderDecoder,
)
from aiayn.builder.decode.search import beam_hypotheses, beam_search, length_penalty
from aiayn.builder.decode.translate import translate_ids
from aiayn.schemas.decode import DecodeSpec
from tests.builder.decode.greedy import greedy, greedy_reference
from tests.models import BOS, EOS, PAD, tiny_model

V = 13


def make_model(*, d_model: int = 16, learned_positions: bool = False, tied: bool = True) -> EncoderDecoder:
    return tiny_model(vocab=V, d_model=d_model, h=2, d_k=4, d_v=6, d_ff=32, learned_positions=learned_positions, tied=tied)


@pytest.fixture(scope="module")
def random_model() -> EncoderDecoder:
    torch.manual_seed(0)
    model = make_model(tied=False).double()  # float64: no near-ties flipping between the two paths
    with torch.no_grad():
        model.generator.weight.normal_()  # peaked enough to end sentences at different steps
        model.generator.bias[EOS] = 1.5
    return model.eval()


@pytest.fixture(scope="module")
def src() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    lengths = [7, 2, 5, 1, 4]
    batch = torch.full((len(lengths), max(lengths)), PAD)
    for row, n in enumerate(lengths):
        batch[row, :n] = torch.randint(3, V, (n,), generator=g)
    return batch


def _bigram_model(weights: dict[tuple[int, int], float]) -> EncoderDecoder:
    """A decoder whose next-token logits depend only on the previous token, never on the source.

    Every sub-layer output is zeroed and positions are zero, so the decoder output is a
    LayerNorm of the previous token's (one-hot) embedding; generator weight (nxt, prev) then
    raises the logit of `nxt` after `prev`.
    """
    d_model = 16
    model = make_model(d_model=d_model, learned_positions=True, tied=False)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for module in model.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
        model.src_embed.token.table.weight.copy_(torch.eye(V, d_model))
        for (prev, nxt), weight in weights.items():
            model.generator.weight[nxt, prev] = weight
    return model.eval()


def _chain_model(chain: dict[int, int]) -> EncoderDecoder:
    """Emits chain[previous token] with probability ~1."""
    return _bigram_model({(prev, nxt): 20.0 for prev, nxt in chain.items()})


def test_length_penalty_closed_form():
    assert length_penalty(1, 0.6) == 1.0
    assert length_penalty(7, 0.6) == pytest.approx(2**0.6)
    assert length_penalty(10, 0.0) == 1.0
    assert length_penalty(3, 1.0) == pytest.approx(8 / 6)
    lengths = torch.tensor([1.0, 7.0, 55.0])
    expected = torch.tensor([1.0, 2**0.6, 10**0.6])
    torch.testing.assert_close(length_penalty(lengths, 0.6), expected)


def test_greedy_cached_equals_uncached(random_model, src):
    cached = greedy(random_model, src, bos_id=BOS, eos_id=EOS, max_len_b=6)
    reference = greedy(random_model, src, bos_id=BOS, eos_id=EOS, max_len_b=6, use_cache=False)
    assert cached == reference
    limits = [n + 6 for n in src.ne(PAD).sum(1).tolist()]
    lengths = [len(hyp) for hyp in cached]
    # the batch must exercise both ways of finishing, so that dropping rows is tested
    assert any(n < limit for n, limit in zip(lengths, limits))
    assert any(n == limit for n, limit in zip(lengths, limits))


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.5])
def test_beam_cached_equals_uncached(random_model, src, alpha):
    cached = beam_search(random_model, src, bos_id=BOS, eos_id=EOS, beam=4, alpha=alpha, max_len_b=6)
    reference = beam_search(random_model, src, bos_id=BOS, eos_id=EOS, beam=4, alpha=alpha, max_len_b=6, use_cache=False)
    assert cached == reference
    assert len({len(hyp) for hyp in cached}) > 1


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_one_is_greedy(random_model, src, alpha):
    expected = greedy_reference(random_model, src, bos_id=BOS, eos_id=EOS, max_len_b=6)
    assert beam_search(random_model, src, bos_id=BOS, eos_id=EOS, beam=1, alpha=alpha, max_len_b=6) == expected


def test_beam_escapes_the_greedy_trap():
    # after BOS: 5 barely beats 6; after 5 the best is a weak 7, then EOS; after 6, EOS is sure
    model = _bigram_model({(BOS, 5): 2.0, (BOS, 6): 1.95, (5, 7): 0.3, (7, EOS): 5.0, (6, EOS): 5.0})
    src = torch.tensor([[4, 4, 4], [3, PAD, PAD]])
    assert greedy(model, src, bos_id=BOS, eos_id=EOS) == [[5, 7], [5, 7]]
    for use_cache in (True, False):
        assert beam_search(model, src, bos_id=BOS, eos_id=EOS, beam=1, use_cache=use_cache) == [[5, 7], [5, 7]]
        for beam in (2, 4):
            assert beam_search(model, src, bos_id=BOS, eos_id=EOS, beam=beam, use_cache=use_cache) == [[6], [6]]


def test_length_penalty_decides_between_a_short_and_a_long_hypothesis():
    # after 4: EOS (short, [4]) is a bit likelier than 5, which surely continues 7, EOS ([4, 5, 7])
    model = _bigram_model({(BOS, 4): 20.0, (4, EOS): 2.35, (4, 5): 1.95, (5, 7): 20.0, (7, EOS): 5.0})
    src = torch.tensor([[3, 3]])

    def score(hyp: list[int], alpha: float) -> float:
        log_probs = model(src, torch.tensor([[BOS] + hyp])).log_softmax(-1)[0]
        total = sum(log_probs[t, token].item() for t, token in enumerate(hyp + [EOS]))
        return total / length_penalty(len(hyp) + 1, alpha)  # |Y| counts EOS

    winners = {}
    for alpha in (0.0, 0.6, 2.0):
        expected = max([[4], [4, 5, 7]], key=lambda hyp: score(hyp, alpha))
        winners[alpha] = beam_search(model, src, bos_id=BOS, eos_id=EOS, alpha=alpha)[0]
        assert winners[alpha] == expected
    assert winners == {0.0: [4], 0.6: [4], 2.0: [4, 5, 7]}


def test_known_sequence_is_returned_exactly(src):
    model = _chain_model({BOS: 5, 5: 7, 7: 3, 3: EOS})
    for use_cache in (True, False):
        assert greedy(model, src, bos_id=BOS, eos_id=EOS, use_cache=use_cache) == [[5, 7, 3]] * 5
        assert beam_search(model, src, bos_id=BOS, eos_id=EOS, use_cache=use_cache) == [[5, 7, 3]] * 5


def test_early_termination_stops_once_nothing_can_beat_the_best():
    model = _chain_model({BOS: 5, 5: 7, 7: 3, 3: EOS})
    calls = []
    model.generator.register_forward_hook(lambda *args: calls.append(1))
    src = torch.tensor([[4, 4, 4]])
    assert beam_search(model, src, bos_id=BOS, eos_id=EOS, beam=4, max_len_b=50) == [[5, 7, 3]]
    # 4 steps (5, 7, 3, EOS), not 53: the live hypotheses are far below the finished one
    assert len(calls) == 4


def test_hypotheses_stop_at_source_length_plus_max_len_b(src):
    model = _chain_model({BOS: 5, 5: 7, 7: 3, 3: 5})  # never emits EOS
    limits = [n + 4 for n in src.ne(PAD).sum(1).tolist()]
    for hyps in (
        greedy(model, src, bos_id=BOS, eos_id=EOS, max_len_b=4),
        beam_search(model, src, bos_id=BOS, eos_id=EOS, max_len_b=4),
        beam_search(model, src, bos_id=BOS, eos_id=EOS, max_len_b=4, use_cache=False),
    ):
        assert [len(hyp) for hyp in hyps] == limits
        assert all(hyp == ([5, 7, 3] * 5)[:limit] for hyp, limit in zip(hyps, limits))


def test_random_model_never_exceeds_the_limit(random_model, src):
    limits = [n + 3 for n in src.ne(PAD).sum(1).tolist()]
    for beam in (1, 3):
        hyps = beam_search(random_model, src, bos_id=BOS, eos_id=EOS, beam=beam, max_len_b=3)
        assert all(len(hyp) <= limit and PAD not in hyp and EOS not in hyp for hyp, limit in zip(hyps, limits))


def test_search_messages(random_model, src):
    with pytest.raises(ValueError, match=r"^beam \(0\) must be >= 1$"):
        beam_search(random_model, src, bos_id=BOS, eos_id=EOS, beam=0)
    with pytest.raises(ValueError, match=r"^alpha \(-0.5\) must be >= 0"):
        beam_search(random_model, src, bos_id=BOS, eos_id=EOS, alpha=-0.5)
    with pytest.raises(ValueError, match=r"^src rows \[1\] are empty \(all padding\); there is nothing to translate$"):
        greedy(random_model, torch.tensor([[3, 4], [PAD, PAD]]), bos_id=BOS, eos_id=EOS)
    with pytest.raises(ValueError, match=r"^src must be \(batch, length\) token ids, got shape \(3,\)$"):
        greedy(random_model, torch.tensor([3, 4, 5]), bos_id=BOS, eos_id=EOS)
    with pytest.raises(ValueError, match=r"^eos_id \(0\) equals the model's pad_id: padding is masked, so it cannot be eos$"):
        beam_search(random_model, src, bos_id=BOS, eos_id=PAD)
    with pytest.raises(ValueError, match=r"^max_len_b \(-1\) must be >= 0$"):
        greedy(random_model, src, bos_id=BOS, eos_id=EOS, max_len_b=-1)
    random_model.train()
    try:
        with pytest.raises(ValueError, match=r"^search needs model.eval\(\): dropout is active in training mode$"):
            greedy(random_model, src, bos_id=BOS, eos_id=EOS)
    finally:
        random_model.eval()
    assert math.isclose(length_penalty(0, 0.6), (5 / 6) ** 0.6)


def test_fairseq_length_penalty_closed_form():
    assert length_penalty(4, 0.5, "fairseq") == 2.0
    assert length_penalty(3, 1.0, "fairseq") == 3.0
    assert length_penalty(7, 0.0, "fairseq") == 1.0
    assert length_penalty(3, 1.0, "gnmt") == pytest.approx(8 / 6)  # the default form, named
    torch.testing.assert_close(length_penalty(torch.tensor([1.0, 4.0, 9.0]), 0.5, "fairseq"), torch.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"^length_penalty \('nmt'\) must be one of \['fairseq', 'gnmt'\]$"):
        length_penalty(3, 1.0, "nmt")


def test_fairseq_length_penalty_changes_the_pick():
    # the model of the test above: [4] (log P -0.574, |Y| = 2) against [4, 5, 7] (-0.833, |Y| = 4)
    model = _bigram_model({(BOS, 4): 20.0, (4, EOS): 2.35, (4, 5): 1.95, (5, 7): 20.0, (7, EOS): 5.0})
    src = torch.tensor([[3, 3]])

    def log_prob(hyp: list[int]) -> float:
        log_probs = model(src, torch.tensor([[BOS] + hyp])).log_softmax(-1)[0]
        return sum(log_probs[t, token].item() for t, token in enumerate(hyp + [EOS]))

    short, long = log_prob([4]), log_prob([4, 5, 7])
    # at alpha 0.6, gnmt's lp grows too slowly to favour the long one; fairseq's |Y|^alpha does not
    assert short / length_penalty(2, 0.6, "gnmt") > long / length_penalty(4, 0.6, "gnmt")
    assert short / 2**0.6 < long / 4**0.6
    for use_cache in (True, False):
        gnmt = beam_search(model, src, bos_id=BOS, eos_id=EOS, alpha=0.6, use_cache=use_cache)
        fairseq = beam_search(model, src, bos_id=BOS, eos_id=EOS, alpha=0.6, length_penalty="fairseq", use_cache=use_cache)
        assert (gnmt, fairseq) == ([[4]], [[4, 5, 7]])
    with pytest.raises(ValueError, match=r"^length_penalty \('average'\) must be one of \['fairseq', 'gnmt'\]$"):
        beam_search(model, src, bos_id=BOS, eos_id=EOS, length_penalty="average")


@pytest.mark.parametrize("alpha", [0.6, 1.5])
def test_fairseq_beam_cached_equals_uncached(random_model, src, alpha):
    kwargs = dict(bos_id=BOS, eos_id=EOS, beam=4, alpha=alpha, max_len_b=6, length_penalty="fairseq")
    assert beam_search(random_model, src, **kwargs) == beam_search(random_model, src, **kwargs, use_cache=False)


def test_fairseq_early_termination_stops_once_nothing_can_beat_the_best():
    # |Y|^alpha grows with length and log P <= 0 only falls, so s / lp(max length) bounds a live score
    model = _chain_model({BOS: 5, 5: 7, 7: 3, 3: EOS})
    calls = []
    model.generator.register_forward_hook(lambda *args: calls.append(1))
    src = torch.tensor([[4, 4, 4]])
    hyps = beam_search(model, src, bos_id=BOS, eos_id=EOS, beam=4, max_len_b=50, length_penalty="fairseq")
    assert hyps == [[5, 7, 3]]
    assert len(calls) == 4


def test_learned_positions_cap_the_output_length():
    model = _chain_model({BOS: 5, 5: 7, 7: 3, 3: 5})  # never emits EOS; 64 learned positions
    src = torch.tensor([[4] * 30])
    for hyps in (
        greedy(model, src, bos_id=BOS, eos_id=EOS, max_len_b=50),
        beam_search(model, src, bos_id=BOS, eos_id=EOS, max_len_b=50),
    ):
        assert [len(hyp) for hyp in hyps] == [64]  # not 30 + 50: there is no position 64


def _decode_three_then_one(model, src, tgt, reorder) -> torch.Tensor:
    """Logits of position 3 after decoding tgt[:, :3] step by step and calling reorder(state),
    which returns (hypothesis rows, memory rows) of the batch it made."""
    memory, pad = model.encode(src)
    state = model.init_state()
    for t in range(3):
        model.decode(tgt[:, t : t + 1], memory, pad, state)
    rows, memory_rows = reorder(state)
    return model.decode(tgt[rows, 3:4], memory[memory_rows], pad[memory_rows], state)[:, 0]


def test_decoder_state_composes_lazy_reorders(random_model):
    torch.manual_seed(1)
    src, tgt = torch.randint(3, V, (3, 5)), torch.randint(3, V, (3, 4))

    def twice(state):
        state.reorder(torch.tensor([2, 0, 1]))
        state.reorder(torch.tensor([1, 1, 0]))  # no decoding in between: the selections compose
        rows = torch.tensor([0, 0, 2])
        return rows, rows

    logits = _decode_three_then_one(random_model, src, tgt, twice)
    torch.testing.assert_close(logits, random_model(src[[0, 0, 2]], tgt[[0, 0, 2], :4])[:, 3])


def test_beams_move_without_touching_the_memory_cache(random_model):
    torch.manual_seed(2)
    src = torch.randint(3, V, (2, 5)).repeat_interleave(2, 0)  # 2 sentences x 2 beams sharing memory
    tgt = torch.randint(3, V, (4, 4))
    rows = torch.tensor([1, 1, 3, 2])

    def within_sentences(state):
        state.reorder(rows, memory=False)
        return rows, torch.arange(4)

    logits = _decode_three_then_one(random_model, src, tgt, within_sentences)
    torch.testing.assert_close(logits, random_model(src[rows], tgt[rows, :4])[:, 3])

    def drop_the_first_sentence(state):
        state.reorder(torch.tensor([3, 2]), memory=False)
        state.reorder_memory(torch.tensor([2, 3]))  # the memory rows of the sentence that stays
        return torch.tensor([3, 2]), torch.tensor([2, 3])

    logits = _decode_three_then_one(random_model, src, tgt, drop_the_first_sentence)
    torch.testing.assert_close(logits, random_model(src[[3, 2]], tgt[[3, 2], :4])[:, 3])


@torch.no_grad()
def scored(model: EncoderDecoder, src: torch.Tensor, y: list[int], *, alpha: float, ended: bool) -> float:
    """log P(Y | X) / ((5 + |Y|) / 6)^alpha, |Y| counting EOS where Y ended with one, log P as the
    search reads it (log_softmax over all V; PAD is never chosen)."""
    y = [*y, EOS] if ended else y
    memory, pad = model.encode(src)
    logp = model.decode(torch.tensor([[BOS, *y[:-1]]]), memory, pad).double().log_softmax(-1)[0]
    return sum(float(logp[i, t]) for i, t in enumerate(y)) / ((5 + len(y)) / 6) ** alpha


def exhaustive(model: EncoderDecoder, src: torch.Tensor, *, alpha: float, limit: int) -> tuple[float, list[int]]:
    """(score, output) of the best output by brute force: every Y over the model's words (no PAD)
    that ends in EOS within `limit` tokens, or reaches `limit` without it."""
    words = [t for t in range(V) if t != PAD]
    best: tuple[float, list[int]] = (-math.inf, [])
    prefixes: list[list[int]] = [[]]
    for length in range(1, limit + 1):
        ended = [scored(model, src, p, alpha=alpha, ended=True) for p in prefixes]
        best = max(best, *zip(ended, prefixes))
        if length == limit:
            cut = [(scored(model, src, p + [w], alpha=alpha, ended=False), p + [w]) for p in prefixes for w in words if w != EOS]
            best = max(best, *cut)
        prefixes = [p + [w] for p in prefixes for w in words if w != EOS]
    return best


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_beam_search_finds_what_an_exhaustive_search_finds(alpha):
    """A beam as wide as every prefix keeps them all, so it returns the exhaustive best (early
    termination only saves steps); a narrow beam never scores above it."""
    torch.manual_seed(2)
    model = tiny_model(vocab=V, d_model=8, h=2, d_k=4, d_v=4, d_ff=16, n_enc=1, n_dec=1, tied=False).double()
    with torch.no_grad():  # a model whose best output depends on alpha ([9] at 0 and 0.6, [9, 11, 10] at 2) and is not greedy's
        model.generator.weight.normal_(std=0.5)
        model.generator.bias[EOS] = 0.5
    model.eval()
    src = torch.tensor([[5, 7]])
    best, expected = exhaustive(model, src, alpha=alpha, limit=2 + 1)  # src_len + max_len_b
    wide = (V - 1) ** 3
    assert beam_search(model, src, bos_id=BOS, eos_id=EOS, beam=wide, alpha=alpha, max_len_b=1) == [expected]
    for narrow in (1, 2):
        [found] = beam_search(model, src, bos_id=BOS, eos_id=EOS, beam=narrow, alpha=alpha, max_len_b=1)
        assert scored(model, src, found, alpha=alpha, ended=len(found) < 3) <= best + 1e-12
    assert greedy(model, src, bos_id=BOS, eos_id=EOS, max_len_b=1) != [expected]  # the search had work to do


def test_early_stopping_false_goes_on_while_the_best_live_hypothesis_beats_the_worst_finished():
    """Beam 2, |Y|^1.5: [6] and [4, 5] finish first; early_stopping (fairseq's, the default) stops
    there. early_stopping=False (transformers' default) goes on, as [4, 5, 7] scored at its current
    length still beats [6], and finds it: the better hypothesis."""
    model = _bigram_model({(BOS, 4): 4.5, (BOS, 6): 3.0, (6, EOS): 7.5, (4, 5): 5.9, (4, EOS): 3.2, (5, EOS): 4.5, (5, 7): 2.6,
                           (7, EOS): 20.0})  # fmt: skip
    src = torch.tensor([[3, 3]])
    settings = dict(bos_id=BOS, eos_id=EOS, beam=2, alpha=1.5, length_penalty="fairseq")
    stopped = beam_hypotheses(model, src, **settings)[0][0]
    went_on = beam_hypotheses(model, src, **settings, early_stopping=False)[0][0]
    assert (stopped.ids, went_on.ids) == ([4, 5], [4, 5, 7]) and went_on.score > stopped.score
    memory, pad = model.encode(src)
    logp = model.decode(torch.tensor([[BOS, 4, 5, 7]]), memory, pad).log_softmax(-1)[0]
    assert went_on.score == pytest.approx(sum(float(logp[i, t]) for i, t in enumerate([4, 5, 7, EOS])) / 4**1.5, abs=1e-5)
    # the decode section's setting reaches the search (what translate, evaluate and validation call)
    for early, expected in ((True, [4, 5]), (False, [4, 5, 7])):
        decode = DecodeSpec(beam=2, alpha=1.5, length_penalty="fairseq", early_stopping=early)
        assert translate_ids(model, [[3, 3]], decode, bos_id=BOS, eos_id=EOS) == [expected]

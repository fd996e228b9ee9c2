"""n-best lists and forced scoring on random models: the n best are the exhaustive search's n best,
distinct and ordered; forced decoding of the search's own output gives the search's score;
scores are the same with and without the decoding cache; alignments in Pharaoh's format."""

import math

import pytest
import torch

from aiayn.builder.data.bpe import train_tokenizer
from aiayn.builder.decode.forced import default_alignment_layer, hard_alignment, pharaoh, score_ids, word_alignment
from aiayn.builder.decode.search import beam_hypotheses, beam_search
from aiayn.builder.errors import UserError
from aiayn.schemas.decode import DecodeSpec
from tests.builder.decode.test_search import V, random_model, scored, src  # noqa: F401  (fixtures)
from tests.models import BOS, EOS, PAD, tiny_model


def all_outputs(model, source, *, alpha: float, limit: int) -> list[tuple[float, list[int]]]:
    """Every output of at most `limit` tokens with its score, best first (as test_search's
    exhaustive search enumerates them)."""
    words = [t for t in range(V) if t != PAD and t != EOS]
    found, prefixes = [], [[]]
    for length in range(1, limit + 1):
        found += [(scored(model, source, p, alpha=alpha, ended=True), p) for p in prefixes]
        prefixes = [p + [w] for p in prefixes for w in words]
        if length == limit:
            found += [(scored(model, source, p, alpha=alpha, ended=False), p) for p in prefixes]
    return sorted(found, key=lambda x: -x[0])


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_a_wide_beams_n_best_are_the_exhaustive_n_best(alpha):
    torch.manual_seed(2)
    model = tiny_model(vocab=V, d_model=8, h=2, d_k=4, d_v=4, d_ff=16, n_enc=1, n_dec=1, tied=False).double()
    with torch.no_grad():
        model.generator.weight.normal_(std=0.5)
        model.generator.bias[EOS] = 0.5
    model.eval()
    source = torch.tensor([[5, 7]])
    expected = all_outputs(model, source, alpha=alpha, limit=3)[:5]
    [found] = beam_hypotheses(model, source, bos_id=BOS, eos_id=EOS, beam=(V - 1) ** 3, alpha=alpha, max_len_b=1, n_best=5)
    assert [h.ids for h in found] == [ids for _, ids in expected]
    assert [h.score for h in found] == pytest.approx([s for s, _ in expected], abs=1e-12)
    assert all(h.ended == (len(h.ids) < 3) for h in found)


@pytest.mark.parametrize("length_penalty", ["gnmt", "fairseq"])
def test_n_best_are_distinct_ordered_and_led_by_the_best(random_model, src, length_penalty):  # noqa: F811
    kwargs = dict(bos_id=BOS, eos_id=EOS, beam=4, alpha=0.6, max_len_b=6, length_penalty=length_penalty)
    found = beam_hypotheses(random_model, src, n_best=4, **kwargs)
    assert [hyps[0].ids for hyps in found] == beam_search(random_model, src, **kwargs)
    for hyps in found:
        assert len(hyps) == 4
        assert len({tuple(h.ids) for h in hyps}) == 4  # distinct
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        assert all(h.log_prob <= 0 and math.isfinite(h.score) for h in hyps)
    one = beam_hypotheses(random_model, src, n_best=1, **kwargs)
    assert [hyps[0] for hyps in one] == [hyps[0] for hyps in found]


def test_n_best_and_scores_are_the_same_without_the_cache(random_model, src):  # noqa: F811
    kwargs = dict(bos_id=BOS, eos_id=EOS, beam=3, alpha=0.6, max_len_b=6, n_best=3)
    cached = beam_hypotheses(random_model, src, **kwargs)
    uncached = beam_hypotheses(random_model, src, use_cache=False, **kwargs)
    assert [[h.ids for h in hyps] for hyps in cached] == [[h.ids for h in hyps] for hyps in uncached]
    for a, b in zip(cached, uncached):
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-9)


def test_n_best_above_the_beam_is_refused(random_model, src):  # noqa: F811
    with pytest.raises(ValueError, match=r"^n_best \(5\) must be between 1 and the beam size \(4\)$"):
        beam_hypotheses(random_model, src, bos_id=BOS, eos_id=EOS, beam=4, n_best=5)


def float_model():
    torch.manual_seed(3)
    model = tiny_model(vocab=V, d_model=16, h=2, d_k=4, d_v=6, d_ff=32, tied=False)
    with torch.no_grad():
        model.generator.weight.normal_()
        model.generator.bias[EOS] = 4.0
    return model.eval()


@pytest.mark.parametrize(("length_penalty", "alpha"), [("gnmt", 0.6), ("fairseq", 0.2), ("gnmt", 0.0)])
def test_forced_scoring_of_the_beams_output_gives_the_beams_score(src, length_penalty, alpha):  # noqa: F811
    """float32, as a model decodes: the full teacher-forced pass against the search's incremental
    one. Hypotheses cut at the length limit (no EOS) are scored without EOS, as the search did."""
    model = float_model()
    decode = DecodeSpec(beam=4, alpha=alpha, length_penalty=length_penalty, max_len_b=4, max_tokens=30)
    found = beam_hypotheses(
        model, src, bos_id=BOS, eos_id=EOS, beam=4, alpha=alpha, max_len_b=4, length_penalty=length_penalty, n_best=4
    )
    sources = [[t for t in row if t != PAD] for row in src.tolist()]
    flat = [(i, h) for i, hyps in enumerate(found) for h in hyps]
    assert {h.ended for _, h in flat} == {True, False}  # both kinds are checked
    forced = score_ids(
        model,
        [sources[i] for i, _ in flat],
        [h.ids for _, h in flat],
        decode,
        bos_id=BOS,
        eos_id=EOS,
        ended=[h.ended for _, h in flat],
    )
    for (_, h), s in zip(flat, forced):
        assert s.score == pytest.approx(h.score, abs=1e-4)
        assert s.log_prob == pytest.approx(h.log_prob, abs=1e-4)
        assert s.length == len(h.ids) + h.ended
        assert len(s.token_log_probs) == s.length and sum(s.token_log_probs) == pytest.approx(s.log_prob, abs=1e-9)


def test_forced_scoring_is_the_same_batched_and_one_by_one(src):  # noqa: F811
    model = float_model()
    g = torch.Generator().manual_seed(1)
    sources = [[t for t in row if t != PAD] for row in src.tolist()]
    targets = [torch.randint(3, V, (n,), generator=g).tolist() for n in (0, 3, 1, 5, 2)]
    wide = score_ids(model, sources, targets, DecodeSpec(max_tokens=1000), bos_id=BOS, eos_id=EOS, align=True)
    for i, (s, t) in enumerate(zip(sources, targets)):
        [alone] = score_ids(model, [s], [t], DecodeSpec(max_tokens=1000), bos_id=BOS, eos_id=EOS, align=True)
        assert alone.token_log_probs == pytest.approx(wide[i].token_log_probs, abs=1e-5)
        assert alone.alignment == wide[i].alignment
        assert len(alone.alignment) == len(t) and all(0 <= a < len(s) for a, _ in alone.alignment)  # never an EOS
    narrow = score_ids(model, sources, targets, DecodeSpec(max_tokens=10), bos_id=BOS, eos_id=EOS)  # several batches
    assert [x.score for x in narrow] == pytest.approx([x.score for x in wide], abs=1e-5)
    assert wide[0].length == 1 and wide[0].alignment == []  # the empty target: EOS alone
    with pytest.raises(UserError, match=r"^source 2 is empty: there is nothing to condition on$"):
        score_ids(model, [[4], []], [[5], [6]], DecodeSpec(), bos_id=BOS, eos_id=EOS)


def test_hard_alignment_takes_each_target_tokens_most_weighted_source_token():
    weights = torch.tensor(
        [  # target tokens (rows) x source tokens (columns); the last row is EOS's, the last column </s>
            [0.1, 0.7, 0.1, 0.1],
            [0.6, 0.2, 0.1, 0.1],
            [0.1, 0.1, 0.2, 0.6],  # </s> weighs most: the best real source token (2) is taken
            [0.9, 0.0, 0.0, 0.1],
        ]
    )
    pairs = hard_alignment(weights, n_source=3, n_target=3)
    assert pairs == [(1, 0), (0, 1), (2, 2)]
    assert pharaoh(pairs) == "1-0 0-1 2-2"
    # words: source tokens 0, 1 are word 0, token 2 word 1; target tokens 0 word 0, 1 and 2 word 1
    assert word_alignment(pairs, [0, 0, 1], [0, 1, 1]) == [(0, 0), (0, 1), (1, 1)]
    assert hard_alignment(weights, n_source=0, n_target=3) == []


def test_the_default_alignment_layer():
    assert [default_alignment_layer(n) for n in (1, 2, 3, 6)] == [0, 1, 1, 4]


def test_word_index_follows_the_words_of_the_decoded_text():
    tokenizer = train_tokenizer(["ich weiß, dass er sieben Autos verkaufte"] * 3, vocab_size=60)
    ids = tokenizer.encode("ich weiß, dass er verkaufte")
    words = tokenizer.word_index(ids)
    assert len(words) == len(ids) and words[0] == 0 and words[-1] == 4
    decoded = tokenizer.decode(ids).split()
    for t, w in enumerate(words):  # each token's piece is part of its word
        piece = tokenizer.id_to_token(ids[t]).lstrip("▁")
        assert piece in decoded[w]
    assert words == sorted(words) and set(words) == set(range(5))

"""Ensembles (builder/decode/ensemble.py): a model with itself is the model; a wide beam over two
models finds the exhaustive best under their averaged distribution; forced scoring of an
ensemble's n-best gives its beam scores; the cache changes nothing."""

import math

import pytest
import torch

from aiayn.builder.decode.ensemble import Ensemble, mean_of_probabilities
from aiayn.builder.decode.forced import score_ids
from aiayn.builder.decode.search import beam_hypotheses, length_penalty
from aiayn.schemas.decode import DecodeSpec
from tests.builder.decode.greedy import greedy
from tests.builder.decode.test_search import V, src  # noqa: F401  (fixture)
from tests.models import BOS, EOS, PAD, tiny_model


def member(seed: int, *, d_model: int = 8, learned_positions: bool = False):
    torch.manual_seed(seed)
    model = tiny_model(
        vocab=V, d_model=d_model, h=2, d_k=4, d_v=4, d_ff=16, n_enc=1, n_dec=1, tied=False, learned_positions=learned_positions
    ).double()
    with torch.no_grad():
        model.generator.weight.normal_(std=0.7)
        model.generator.bias[EOS] = 0.8
    return model.eval()


@torch.no_grad()
def averaged_log_probs(models, source: torch.Tensor, outputs: list[list[int]]) -> list[float]:
    """log P of each output (EOS included where it has one) under the mean of the members'
    probabilities, token by token, from each member's own teacher-forced pass (not through Ensemble)."""
    width = max(len(o) for o in outputs)
    tgt_in = torch.tensor([[BOS, *o[:-1]] + [PAD] * (width - len(o)) for o in outputs])
    per_model = [m(source.expand(len(outputs), -1), tgt_in).log_softmax(-1) for m in models]  # (N, T, V) each
    totals = []
    for n, output in enumerate(outputs):
        total = 0.0
        for t, token in enumerate(output):
            probs = [math.exp(float(lp[n, t, token])) for lp in per_model]
            total += math.log(sum(probs) / len(probs))
        totals.append(total)
    return totals


def test_the_mean_of_probabilities_closed_form():
    a, b = torch.tensor([math.log(0.2), math.log(0.8)]), torch.tensor([math.log(0.6), math.log(0.4)])
    torch.testing.assert_close(mean_of_probabilities([a, b]).exp(), torch.tensor([0.4, 0.6]))


def test_an_ensemble_of_a_model_with_itself_is_the_model(src):  # noqa: F811
    model = member(1)
    pair = Ensemble([model, model]).eval()
    kwargs = dict(bos_id=BOS, eos_id=EOS, beam=4, alpha=0.6, max_len_b=6, n_best=3)
    alone, twice = beam_hypotheses(model, src, **kwargs), beam_hypotheses(pair, src, **kwargs)
    assert [[h.ids for h in hs] for hs in twice] == [[h.ids for h in hs] for hs in alone]
    for a, b in zip(alone, twice):
        assert [h.score for h in b] == pytest.approx([h.score for h in a], abs=1e-9)
    assert greedy(pair, src, bos_id=BOS, eos_id=EOS, max_len_b=6) == greedy(model, src, bos_id=BOS, eos_id=EOS, max_len_b=6)


def test_a_wide_beam_over_two_models_is_the_exhaustive_best_of_their_average():
    models = [member(2), member(3, d_model=12)]  # members of different widths share the memory
    pair = Ensemble(models).eval()
    source = torch.tensor([[5, 7, 4]])
    words = [t for t in range(V) if t not in (PAD, EOS)]
    outputs, prefixes = [], [[]]
    for length in range(1, 4):  # every output of at most 3 tokens (max_len_a 0, max_len_b 3)
        outputs += [(p, True) for p in prefixes]
        prefixes = [p + [w] for p in prefixes for w in words]
        outputs += [(p, False) for p in prefixes] if length == 3 else []
    log_probs = averaged_log_probs(models, source, [[*p, EOS] if ended else p for p, ended in outputs])
    for alpha in (0.0, 1.0):
        scores = [lp / float(length_penalty(len(p) + ended, alpha)) for lp, (p, ended) in zip(log_probs, outputs)]
        expected = sorted(zip(scores, (p for p, _ in outputs)), key=lambda x: -x[0])[:4]
        [hyps] = beam_hypotheses(
            pair, source, bos_id=BOS, eos_id=EOS, beam=(V - 1) ** 3, alpha=alpha, max_len_a=0, max_len_b=3, n_best=4
        )
        assert [h.ids for h in hyps] == [ids for _, ids in expected]
        assert [h.score for h in hyps] == pytest.approx([s for s, _ in expected], abs=1e-9)
    # neither member alone finds the ensemble's best: it is not one of its members
    alone = [
        beam_hypotheses(m, source, bos_id=BOS, eos_id=EOS, beam=8, alpha=1.0, max_len_a=0, max_len_b=3)[0][0] for m in models
    ]
    assert all(h.ids != hyps[0].ids for h in alone), [h.ids for h in alone]


def test_forced_scoring_of_an_ensembles_n_best_gives_its_beam_scores(src):  # noqa: F811
    pair = Ensemble([member(4), member(5)]).eval()
    decode = DecodeSpec(beam=4, alpha=0.6, max_len_b=6, max_tokens=1000)
    found = beam_hypotheses(pair, src, bos_id=BOS, eos_id=EOS, beam=4, alpha=0.6, max_len_b=6, n_best=4)
    sources = [[t for t in row if t != PAD] for row in src.tolist()]
    flat = [(i, h) for i, hyps in enumerate(found) for h in hyps]
    scored = score_ids(
        pair, [sources[i] for i, _ in flat], [h.ids for _, h in flat], decode, bos_id=BOS, eos_id=EOS, ended=[h.ended for _, h in flat]
    )  # fmt: skip
    assert [s.score for s in scored] == pytest.approx([h.score for _, h in flat], abs=1e-9)
    assert [s.log_prob for s in scored] == pytest.approx([h.log_prob for _, h in flat], abs=1e-9)


def test_an_ensembles_beam_is_the_same_without_the_cache(src):  # noqa: F811
    pair = Ensemble([member(6), member(7, d_model=12)]).eval()
    kwargs = dict(bos_id=BOS, eos_id=EOS, beam=3, alpha=0.6, max_len_b=6, n_best=3)
    cached, uncached = beam_hypotheses(pair, src, **kwargs), beam_hypotheses(pair, src, use_cache=False, **kwargs)
    assert [[h.ids for h in hs] for hs in cached] == [[h.ids for h in hs] for hs in uncached]
    for a, b in zip(cached, uncached):
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-9)


def test_an_ensemble_stops_at_its_shortest_members_positions():
    short, long = member(8, learned_positions=True), member(9)
    pair = Ensemble([long, short]).eval()
    source = torch.tensor([[5, 6]])
    assert pair.output_room(source) == short.output_room(source) is not None
    [ids] = greedy(pair, source, bos_id=BOS, eos_id=EOS, max_len_b=10_000)
    assert len(ids) <= short.output_room(source)


def test_members_that_read_differently_are_refused():
    with pytest.raises(ValueError, match=r"^an ensemble needs two or more models, got 1$"):
        Ensemble([member(1)])
    other = tiny_model(vocab=V + 1, d_model=8, h=2, d_k=4, d_v=4, d_ff=16, n_enc=1, n_dec=1, tied=False)
    with pytest.raises(
        ValueError, match=r"^the members of an ensemble read their inputs alike: their vocab_size differ \(\['13', '14'\]\)$"
    ):
        Ensemble([member(1), other.double()])


@torch.no_grad()
def test_an_ensembles_memory_gives_each_member_its_own():
    """Members of any graph: the ensemble's memory holds each member's, whatever its shape (an
    encoder's output of its own width, or a decoder-only model's prompt ids), and its next-token
    distribution is the mean of the members' on their own memories."""
    from tests.builder.decode.test_decoder_only_translation import model as decoder_only
    from tests.builder.decode.test_decoder_only_translation import prompts

    encoder_decoders = [member(6), member(7, d_model=12)]
    source = torch.tensor([[5, 6, 7], [8, 9, PAD]])
    prompt = prompts(2)
    decoder_onlys = [decoder_only("causal"), decoder_only("causal")]
    with torch.no_grad():
        decoder_onlys[1].generator.bias.normal_()  # two different members
    for members, given, tgt in ((encoder_decoders, source, torch.tensor([[BOS, 5], [BOS, 9]])), (decoder_onlys, prompt, prompt)):
        pair = Ensemble(members).eval()
        memory, padding = pair.encode(given)
        alone = []
        for m in members:
            own, own_padding = m.encode(given)
            alone.append(m.decode(tgt, own, own_padding).double().log_softmax(-1))
        torch.testing.assert_close(pair.decode(tgt, memory, padding).double(), mean_of_probabilities(alone))
        assert [part.shape for part in pair._memories(memory)] == [m.encode(given)[0].shape for m in members]

"""Sampling (builder/decode/sampling.py): the empirical frequencies of a tiny model's samples fit its
distribution (Pearson's chi-squared test at a level fixed beforehand, with a fixed seed; the same
test rejects samples drawn at another temperature), the filters' closed forms, a seed's
reproducibility, and each sample's scores equal forced scoring's."""

import math
from collections import Counter

import pytest
import torch

from aiayn.builder.decode.forced import score_ids
from aiayn.builder.decode.sampling import Sampling, sample_hypotheses
from aiayn.schemas.decode import DecodeSpec
from tests.builder.decode.test_search import V, src  # noqa: F401  (fixture)
from tests.models import BOS, EOS, PAD, tiny_model

LEVEL = 1e-3  # the significance level, fixed before looking at any sample


def peaked_model(seed: int = 11):
    torch.manual_seed(seed)
    model = tiny_model(vocab=V, d_model=8, h=2, d_k=4, d_v=4, d_ff=16, n_enc=1, n_dec=1, tied=False).double()
    with torch.no_grad():
        model.generator.weight.normal_(std=1.5)
        model.generator.bias[EOS] = 1.0
    return model.eval()


@torch.no_grad()
def output_distribution(model, source: torch.Tensor) -> dict[tuple[tuple[int, ...], bool], float]:
    """P of every output of at most 2 tokens (max_len_a 0, max_len_b 2), as sampling draws them:
    from each step's distribution without <pad>, renormalised."""

    def step(prefixes: list[list[int]]) -> torch.Tensor:
        tgt_in = torch.tensor([[BOS, *p] for p in prefixes])
        logits = model(source.expand(len(prefixes), -1), tgt_in)[:, -1].clone()
        logits[:, PAD] = -math.inf
        return logits.softmax(-1)  # (n, V)

    first = step([[]])[0]
    words = [t for t in range(V) if t not in (PAD, EOS)]
    second = step([[w] for w in words])
    probs = {((), True): float(first[EOS])}
    for i, w in enumerate(words):
        for t in range(V):
            if t != PAD:
                probs[((w,) if t == EOS else (w, t), t == EOS)] = float(first[w] * second[i, t])
    return probs


def chi_squared_p_value(counts: Counter, probs: dict, n: int) -> float:
    """Pearson's test of `counts` (n draws) against `probs`; outcomes expected < 5 times are pooled."""
    stat, pooled_expected, pooled_seen, cells = 0.0, 0.0, 0, 0
    for outcome, p in probs.items():
        if n * p < 5:
            pooled_expected, pooled_seen = pooled_expected + n * p, pooled_seen + counts.get(outcome, 0)
        else:
            stat, cells = stat + (counts.get(outcome, 0) - n * p) ** 2 / (n * p), cells + 1
    if pooled_expected > 0:
        stat, cells = stat + (pooled_seen - pooled_expected) ** 2 / pooled_expected, cells + 1
    assert sum(counts.values()) == n and set(counts) <= set(probs)  # nothing outside the support
    df = cells - 1
    return float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64), torch.tensor(stat / 2, dtype=torch.float64)))


def draws(model, source, n: int, sampling: Sampling, seed: int) -> Counter:
    [found] = sample_hypotheses(
        model, source, bos_id=BOS, eos_id=EOS, n=n, sampling=sampling, generator=torch.Generator().manual_seed(seed),
        max_len_a=0, max_len_b=2,
    )  # fmt: skip
    return Counter((tuple(h.ids), h.ended) for h in found)


def test_samples_fit_the_models_distribution_and_another_temperatures_do_not():
    model, source, n = peaked_model(), torch.tensor([[5, 9, 4]]), 20_000
    probs = output_distribution(model, source)
    assert sum(probs.values()) == pytest.approx(1.0, abs=1e-12)
    assert chi_squared_p_value(draws(model, source, n, Sampling(), seed=1), probs, n) > LEVEL
    # the test has power: samples of a flatter distribution are told apart from the model's
    assert chi_squared_p_value(draws(model, source, n, Sampling(temperature=1.3), seed=1), probs, n) < LEVEL


def test_the_filters_closed_forms():
    probs = torch.tensor([[0.5, 0.25, 0.15, 0.06, 0.04]])
    logits = probs.log()
    torch.testing.assert_close(Sampling().probabilities(logits), probs)
    torch.testing.assert_close(Sampling(top_k=2).probabilities(logits), torch.tensor([[2 / 3, 1 / 3, 0, 0, 0]]))
    torch.testing.assert_close(Sampling(top_p=0.75).probabilities(logits), torch.tensor([[2 / 3, 1 / 3, 0, 0, 0]]))
    torch.testing.assert_close(Sampling(top_p=0.76).probabilities(logits), torch.tensor([[0.5, 0.25, 0.15, 0, 0]]) / 0.9)
    torch.testing.assert_close(Sampling(epsilon=0.05).probabilities(logits), torch.tensor([[0.5, 0.25, 0.15, 0.06, 0]]) / 0.96)
    torch.testing.assert_close(Sampling(epsilon=0.9).probabilities(logits), torch.tensor([[1.0, 0, 0, 0, 0]]))  # argmax stays
    tempered = (logits / 2).softmax(-1)
    torch.testing.assert_close(Sampling(temperature=2).probabilities(logits), tempered)
    with pytest.raises(ValueError, match=r"^epsilon \(1\.0\) must be in \[0, 1\) \(0: no limit\)$"):
        Sampling(epsilon=1.0)
    # temperature first, then the filters (transformers' order of its warpers): at T = 2 the
    # distribution flattens to sqrt(p) and top-p 0.7 keeps three tokens, where it keeps two of p
    root = probs.sqrt() / probs.sqrt().sum()
    torch.testing.assert_close(
        Sampling(temperature=2, top_p=0.7).probabilities(logits),
        torch.cat([root[:, :3] / root[:, :3].sum(), torch.zeros(1, 2)], 1),
    )
    torch.testing.assert_close(
        Sampling(temperature=2, top_k=3, epsilon=0.2).probabilities(logits),
        torch.cat([root[:, :3] / root[:, :3].sum(), torch.zeros(1, 2)], 1),
    )
    # a token as probable as epsilon exactly stays (Hewitt et al.: those below it go)
    exact = float(Sampling().probabilities(logits)[0, 2])
    assert Sampling(epsilon=exact).probabilities(logits)[0, :3].gt(0).all()
    above = torch.nextafter(torch.tensor(exact), torch.tensor(1.0)).item()  # the next float32 up
    assert Sampling(epsilon=above).probabilities(logits)[0, 2] == 0
    # a temperature so small that logits / T overflow float32: the argmax, not NaN
    tiny = Sampling(temperature=1e-39).probabilities(logits)
    assert tiny.tolist() == [[1.0, 0.0, 0.0, 0.0, 0.0]]
    with pytest.raises(ValueError, match=r"^top_p \(0\.0\) must be in \(0, 1\]$"):
        Sampling(top_p=0.0)


def test_a_seed_gives_the_same_samples_and_scores_equal_forced_scorings(src):  # noqa: F811
    model = peaked_model(12)
    settings = dict(bos_id=BOS, eos_id=EOS, n=5, sampling=Sampling(top_k=6), max_len_b=6, alpha=0.6)
    a = sample_hypotheses(model, src, generator=torch.Generator().manual_seed(3), **settings)
    b = sample_hypotheses(model, src, generator=torch.Generator().manual_seed(3), **settings)
    c = sample_hypotheses(model, src, generator=torch.Generator().manual_seed(4), **settings)
    assert a == b and a != c
    uncached = sample_hypotheses(model, src, generator=torch.Generator().manual_seed(3), use_cache=False, **settings)
    assert [[h.ids for h in hs] for hs in uncached] == [[h.ids for h in hs] for hs in a]
    assert all(len(hs) == 5 and [h.score for h in hs] == sorted((h.score for h in hs), reverse=True) for hs in a)
    sources = [[t for t in row if t != PAD] for row in src.tolist()]
    flat = [(i, h) for i, hs in enumerate(a) for h in hs]
    scored = score_ids(
        model, [sources[i] for i, _ in flat], [h.ids for _, h in flat], DecodeSpec(max_len_b=6), bos_id=BOS, eos_id=EOS,
        ended=[h.ended for _, h in flat],
    )  # fmt: skip
    assert [s.log_prob for s in scored] == pytest.approx([h.log_prob for _, h in flat], abs=1e-9)
    assert [s.score for s in scored] == pytest.approx([h.score for _, h in flat], abs=1e-9)


def test_a_temperature_that_float32_makes_0_is_refused_by_its_value():
    logits = torch.tensor([[1.0, 3.0, 2.0]])
    assert Sampling(temperature=1.4e-45).probabilities(logits).tolist() == [[0.0, 1.0, 0.0]]  # float32's least: the argmax
    for tiny in (5e-46, 1e-320):  # 0 in float32: 0 / 0 would be NaN, and the draw an error
        with pytest.raises(ValueError) as e:
            Sampling(temperature=tiny)
        assert str(e.value) == (
            f"temperature ({tiny}) is 0 in float32, which the logits are divided in: give 1.4e-45 or more; for the most "
            "probable token take greedy"
        )

"""data.static_shapes (builder/data/buckets.py): the bucket widths, a whole epoch of a Multi30k-size
sampler in at most num_buckets shapes, and padding that changes nothing the loss computes."""

import itertools

import numpy as np
import pytest
import torch

from aiayn.builder.data.buckets import StaticCollator, bucket_shapes, bucket_widths
from aiayn.builder.data.collate import TranslationCollator
from aiayn.builder.data.dataset import Example
from aiayn.builder.data.sampler import TokenBatchSampler
from aiayn.builder.model.loss import batch_loss, label_smoothed_nll, smoothed_nll_fusable
from tests.models import BOS, EOS, PAD, tiny_model

# Multi30k's training split in size and shape: 29,000 pairs, about 14 source and 15 target tokens
RNG = np.random.default_rng(30)
SRC = np.clip(np.rint(RNG.gamma(6.0, 2.3, 29_000)), 1, 60).astype(np.int64)
TGT = np.clip(np.rint(SRC * 1.1 + RNG.normal(0, 2, 29_000)), 1, 70).astype(np.int64) + 1  # with <s> / </s>
MAX_TOKENS = 6000


def padded_total(widths: np.ndarray, buckets: list[int]) -> int:
    return int(sum(min(b for b in buckets if b >= w) for w in widths))


def test_the_widths_pad_least_of_all_choices():
    widths = np.random.default_rng(1).integers(1, 20, 300)
    values = sorted(set(widths.tolist()))
    for k in (1, 2, 3, 4):
        chosen = bucket_widths(widths, num_buckets=k, boundaries=None)
        assert len(chosen) == k and chosen[-1] == widths.max() and chosen == sorted(chosen)
        brute = min(padded_total(widths, [*edges, values[-1]]) for edges in itertools.combinations(values[:-1], k - 1))
        assert padded_total(widths, chosen) == brute


def test_widths_from_boundaries_and_a_multiple():
    widths = np.asarray([3, 9, 17, 30])
    assert bucket_widths(widths, num_buckets=8, boundaries=[10, 20], multiple=1) == [10, 20, 30]
    assert bucket_widths(widths, num_buckets=8, boundaries=[10, 20, 40], multiple=8) == [16, 24, 32]  # 40: past the longest
    assert bucket_widths(widths, num_buckets=2, boundaries=None, multiple=8) == [16, 32]
    assert bucket_widths(np.asarray([5, 5]), num_buckets=6, boundaries=None) == [5]  # no more buckets than widths


def _bucketed(num_buckets: int = 6, **kw) -> tuple[TokenBatchSampler, list[int]]:
    buckets = bucket_widths(np.maximum(SRC, TGT), num_buckets=num_buckets, boundaries=None)
    return TokenBatchSampler(SRC, TGT, max_tokens=MAX_TOKENS, seed=3, buckets=buckets, **kw), buckets


def _examples(ids: list[int], vocab: int = 13) -> list[Example]:
    rng = np.random.default_rng(ids[0])
    return [Example(i, rng.integers(3, vocab, SRC[i]), rng.integers(3, vocab, TGT[i] - 1)) for i in ids]


@pytest.mark.parametrize("packed", [True, False])
def test_a_whole_epoch_takes_at_most_num_buckets_shapes(packed):
    sampler, buckets = _bucketed()
    shapes = bucket_shapes(sampler.batches, SRC, TGT, buckets, MAX_TOKENS, packed=packed)
    collate = StaticCollator(shapes, pad_id=PAD, bos_id=BOS, eos_id=EOS)
    seen, ids = set(), []
    for batch in sampler:
        width = max(int(max(SRC[batch].max(), TGT[batch].max())), 1)
        assert len(batch) * min(b for b in buckets if b >= width) <= MAX_TOKENS  # the token budget holds
        b = collate(_examples(batch))
        seen.add(tuple(tuple(t.shape) for t in (b.src, b.tgt_in, b.tgt_out, b.tgt_rows, b.src_rows) if t is not None))
        assert (b.src_rows is None) == (not packed)  # every position: no rows, the padding masked
        assert b.n_src_tokens == SRC[batch].sum() and b.n_tgt_tokens == TGT[batch].sum()
        ids += b.ids[b.ids >= 0].tolist()
    assert sorted(ids) == list(range(len(SRC)))  # every pair once, the fillers aside
    assert len(seen) == len(shapes) == len(buckets) == 6
    # the shapes fit Multi30k: the dynamic sampler makes ~40 shapes of this epoch
    dynamic = TokenBatchSampler(SRC, TGT, max_tokens=MAX_TOKENS, seed=3)
    assert len({(len(b), int(max(SRC[b].max(), TGT[b].max()))) for b in dynamic}) > 25
    if packed:  # the fixed packed counts: the fullest batch's real tokens, rounded up to 8
        for s in shapes:
            assert s.src_tokens % 8 == 0 and s.tgt_tokens % 8 == 0 and s.tgt_tokens <= s.rows * s.width


def test_ranks_get_as_many_batches_of_the_same_shapes():
    (zero, buckets), (one, _) = _bucketed(num_replicas=2, rank=0), _bucketed(num_replicas=2, rank=1)
    assert len(list(zero)) == len(list(one)) == len(zero.batches) // 2
    assert sorted(i for b in [*zero, *one] for i in b) == list(range(len(SRC)))
    assert zero.state_dict()["fingerprint"]["buckets"] == buckets  # a resume checks them


def _batch_pair(ids: list[int], shapes: tuple) -> tuple:
    examples = _examples(ids)
    static = StaticCollator(shapes, pad_id=PAD, bos_id=BOS, eos_id=EOS)(examples)
    return static, TranslationCollator(pad_id=PAD, bos_id=BOS, eos_id=EOS)(examples)


@pytest.mark.parametrize("packed", [True, False], ids=["packed", "every_position"])
def test_the_loss_ignores_the_padding_exactly(packed):
    # three pairs in a bucket of 16 rows: 13 filler rows, 16 columns, packed rows of padding
    shapes = bucket_shapes([[0, 1, 2]], SRC, TGT, [40, 70], 640, packed=packed)
    static, plain = _batch_pair([0, 1, 2], shapes)
    assert static.src.shape == (16, 40) and plain.src.size(0) == 3
    torch.manual_seed(0)
    model = tiny_model(dropout=0.0).train()
    results = []
    for batch in (static, plain):
        model.zero_grad(set_to_none=True)
        loss, nll, count = batch_loss(model, batch, eps=0.1, pad_id=PAD, loss=smoothed_nll_fusable)
        (loss + nll).backward()
        results.append((loss.detach(), nll.detach(), count, torch.cat([p.grad.flatten() for p in model.parameters()])))
    (loss_s, nll_s, count_s, grads_s), (loss_p, nll_p, count_p, grads_p) = results
    assert int(count_s) == int(count_p) == static.n_tgt_tokens == plain.n_tgt_tokens
    torch.testing.assert_close(loss_s, loss_p, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(nll_s, nll_p, rtol=1e-6, atol=1e-5)  # PPL = exp(nll / count): the same
    torch.testing.assert_close(grads_s, grads_p, rtol=1e-5, atol=1e-6)
    # and against the reference loss over the unpadded batch's logits of every position
    with torch.no_grad():
        ref = label_smoothed_nll(model(plain.src, plain.tgt_in), plain.tgt_out, eps=0.1, pad_id=PAD)
    torch.testing.assert_close(loss_s, ref[0], rtol=1e-5, atol=1e-5)


def test_filler_rows_and_packed_rows():
    shapes = bucket_shapes([[0, 1, 2]], SRC, TGT, [40, 70], 640, packed=True)
    static, _ = _batch_pair([0, 1, 2], shapes)
    assert static.ids.tolist() == [0, 1, 2] + [-1] * 13
    assert static.src[3:, 0].eq(EOS).all() and static.src[3:, 1:].eq(PAD).all()  # a filler's source: one token
    assert static.tgt_in[3:, 0].eq(BOS).all() and static.tgt_out[3:].eq(PAD).all()  # its target: nothing to predict
    real = int(TGT[[0, 1, 2]].sum())
    assert len(static.tgt_rows) == shapes[0].tgt_tokens == -(-real // 8) * 8
    assert len(static.src_rows) == shapes[0].src_tokens == -(-(int(SRC[[0, 1, 2]].sum()) + 13) // 8) * 8
    assert len(set(static.tgt_rows.tolist())) == len(static.tgt_rows)  # distinct positions
    assert static.tgt_out.flatten()[static.tgt_rows[real:]].eq(PAD).all()  # the extra rows are padding


def test_a_batch_wider_or_longer_than_its_bucket_is_refused():
    shapes = bucket_shapes([[0]], SRC, TGT, [80], 160, packed=True)  # 2 rows of 80
    collate = StaticCollator(shapes, pad_id=PAD, bos_id=BOS, eos_id=EOS)
    with pytest.raises(ValueError, match="3 pairs do not fit the 2 rows of bucket 0"):
        collate(_examples([0, 1, 2]))
    wide = Example(0, np.ones(90, dtype=np.int64), np.ones(3, dtype=np.int64))
    with pytest.raises(ValueError, match=r"a pair of 90 tokens is wider than the widest bucket \(80\)"):
        collate([wide])

"""builder.data.sampler: token budget, coverage, ranks, determinism, resuming."""

import numpy as np
import pytest

from aiayn.builder.data.sampler import TokenBatchSampler, even_out, pack
from aiayn.builder.errors import UserError

N = 1000
RNG = np.random.default_rng(0)
SRC = RNG.integers(1, 40, N)
TGT = RNG.integers(2, 45, N)
SRC[17] = 500  # longer than max_tokens on its own


def make(**kw) -> TokenBatchSampler:
    args = {"max_tokens": 256, "seed": 1} | kw
    return TokenBatchSampler(SRC, TGT, **args)


def padded(batch: list[int]) -> int:
    return len(batch) * max(SRC[batch].max(), TGT[batch].max())


@pytest.mark.parametrize("bucket_size", [None, 100])
def test_token_budget(bucket_size):
    batches = list(make(bucket_size=bucket_size))
    assert [b for b in batches if padded(b) > 256] == [[17]]  # alone in its batch
    assert sorted(i for b in batches for i in b) == list(range(N))


def test_smaller_buckets_pad_more():
    fill = {size: sum(map(padded, make(bucket_size=size))) for size in (None, 100, 10)}
    assert fill[None] < fill[100] < fill[10]
    assert len(make().batches) < len(make(bucket_size=100).batches) < len(make(bucket_size=10).batches)


def test_each_example_once_per_epoch():
    sampler = make()
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        seen = [i for b in sampler for i in b]
        assert sorted(seen) == list(range(N))


def test_batches_are_length_sorted_and_little_padded():
    sampler = make()
    for b in sampler:
        assert list(SRC[b]) == sorted(SRC[b])
    real = sum(int(SRC[b].sum()) for b in sampler)
    assert real / sum(len(b) * int(SRC[b].max()) for b in sampler) > 0.9  # source side


@pytest.mark.parametrize("num_replicas", [2, 3])
def test_ranks_disjoint_equal_and_complete(num_replicas):
    samplers = [make(num_replicas=num_replicas, rank=r) for r in range(num_replicas)]
    for epoch in (0, 5):
        per_rank = []
        for s in samplers:
            s.set_epoch(epoch)
            per_rank.append(list(s))
        assert len({len(b) for b in per_rank}) == 1
        assert all(len(b) == len(s) for b, s in zip(per_rank, samplers))
        seen = [i for batches in per_rank for b in batches for i in b]
        assert sorted(seen) == list(range(N))  # disjoint and complete: no padding, no drop


def test_even_out_splits_the_biggest_batch():
    assert even_out([[0, 1, 2, 3], [4], [5, 6]], 2) == [[0, 1], [2, 3], [4], [5, 6]]
    assert even_out([[0, 1], [2]], 3) == [[0], [1], [2]]
    assert even_out([[0, 1], [2]], 1) == [[0, 1], [2]]


def test_even_out_repeats_only_when_it_cannot_split():
    assert even_out([[0], [1], [2]], 2) == [[0], [1], [2], [0]]
    sampler = TokenBatchSampler([3], [3], max_tokens=10, num_replicas=2, rank=1)
    assert list(sampler) == [[0]]
    # more ranks than batches: the batches repeat in turn, so every rank has one (it had none)
    assert [list(TokenBatchSampler([3], [3], max_tokens=10, num_replicas=3, rank=r)) for r in range(3)] == [[[0]]] * 3
    assert even_out([[0], [1, 2]], 5) == [[0], [1], [2], [0], [1]]


def test_pack():
    order = np.array([0, 1, 2, 3, 4])
    src, tgt = np.array([2, 2, 3, 3, 9]), np.array([1, 4, 1, 1, 1])
    # [0, 1]: 2 x 4 = 8 fits, adding 2 makes 3 x 4 = 12; [3, 4] would be 2 x 9 = 18
    assert pack(order, src, tgt, max_tokens=10) == [[0, 1], [2, 3], [4]]
    assert pack(order, src, tgt, max_tokens=12) == [[0, 1, 2], [3], [4]]
    assert pack(order, src, tgt, max_tokens=8) == [[0, 1], [2, 3], [4]]  # 9 > 8: alone


def reference_pack(order, src, tgt, max_tokens):
    """The greedy packing one example at a time, as the module docstring states it."""
    batches, batch, longest = [], [], 0
    for i in order.tolist():
        width = max(longest, src[i], tgt[i])
        if batch and (len(batch) + 1) * width > max_tokens:
            batches.append(batch)
            batch, width = [], max(src[i], tgt[i])
        batch.append(i)
        longest = width
    return batches + [batch] if batch else batches


@pytest.mark.parametrize("max_tokens", [1, 7, 40, 256, 5000, 10**6])
def test_pack_equals_the_one_at_a_time_reference(max_tokens):
    rng = np.random.default_rng(max_tokens)
    src, tgt = rng.integers(0, 60, 3000), rng.integers(0, 60, 3000)
    src[:5] = tgt[:5] = 0  # empty pairs: nothing to pad
    src[5] = 900  # over every budget but the last
    for order in (np.lexsort((tgt, src)), rng.permutation(3000)):  # sorted as the sampler does, and not
        assert pack(order, src, tgt, max_tokens) == reference_pack(order, src, tgt, max_tokens)


def test_same_seed_same_batches_other_epoch_other_order():
    a, b = make(), make()
    assert list(a) == list(b)
    epoch0 = list(a)
    a.set_epoch(1)
    epoch1 = list(a)
    assert epoch1 != epoch0
    assert sorted(map(tuple, epoch1)) == sorted(map(tuple, epoch0))  # same batches, new order
    a.set_epoch(0)
    assert list(a) == epoch0
    assert list(make(seed=2)) != epoch0


def test_without_shuffle_batches_follow_length_order():
    sampler = make(shuffle=False)
    batches = list(sampler)
    assert batches == sampler.batches
    firsts = [(SRC[b[0]], TGT[b[0]]) for b in batches]
    assert firsts == sorted(firsts)
    sampler.set_epoch(3)
    assert list(sampler) == batches
    assert list(sampler) == batches  # every iteration is the whole split


def test_resume_mid_epoch_yields_exactly_the_rest():
    for rank in (0, 1):
        sampler = make(num_replicas=2, rank=rank)
        sampler.set_epoch(2)
        full = list(sampler)
        it = iter(sampler)
        head = [next(it) for _ in range(7)]
        state = sampler.state_dict()
        assert state["epoch"] == 2 and state["consumed"] == 7
        resumed = make(num_replicas=2, rank=rank)
        resumed.load_state_dict(state)
        resumed.set_epoch(2)  # Lightning calls it again with the same epoch
        assert head + list(resumed) == full
        assert len(resumed) == len(full)  # len is the whole epoch, as Lightning expects
        assert list(resumed) == full  # the next iteration starts over


def test_resume_with_owner_counted_position_and_next_epoch():
    sampler = make()
    state = sampler.state_dict(consumed=3)
    resumed = make()
    resumed.load_state_dict(state)
    assert list(resumed) == list(sampler)[3:]
    done = make()
    done.load_state_dict(make().state_dict(consumed=len(sampler)))  # a finished epoch 0
    nxt = make()
    nxt.set_epoch(1)
    assert done.epoch == 1 and list(done) == list(nxt)


def test_resume_state_from_another_setup_restarts_the_epoch():
    state = make(num_replicas=2).state_dict(consumed=3)
    sampler = make(num_replicas=3)
    with pytest.warns(UserWarning, match="does not fit this sampler"):
        sampler.load_state_dict(state)
    assert sampler.consumed == 0 and len(list(sampler)) == len(sampler)


def test_bad_arguments():
    with pytest.raises(UserError) as e:
        make(max_tokens=0)
    assert str(e.value) == "max_tokens per batch must be at least 1, got 0"
    with pytest.raises(ValueError, match=r"rank 2 must be in \[0, num_replicas=2\)"):
        make(num_replicas=2, rank=2)


def test_by_lengths_is_lexsort_by_source_then_target_ties_in_order():
    from aiayn.builder.data.sampler import by_lengths

    rng = np.random.default_rng(3)
    for high in (5, 300, 70_000):  # few lengths (many ties), typical, and past uint16 (lexsort itself)
        src, tgt = rng.integers(0, high, 5000), rng.integers(0, high, 5000)
        assert np.array_equal(by_lengths(src, tgt), np.lexsort((tgt, src)))
    assert by_lengths(np.array([], dtype=np.int64), np.array([], dtype=np.int64)).tolist() == []

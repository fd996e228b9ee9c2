"""Batches as two arrays (indices and bounds): read out as the lists a batch sampler yields, and
evened out for R ranks exactly as the list algorithm the sampler's docstring states."""

import numpy as np
import pytest

from aiayn.builder.data.batches import Batches, even_out


def reference_even_out(batches, num_replicas):
    """Split the first of the largest batches in two (the first half the shorter) until the count
    divides by num_replicas; with no batch of two left, repeat the first batches, cycling."""
    batches = [list(b) for b in batches]
    while len(batches) % num_replicas:
        biggest = max(range(len(batches)), key=lambda j: len(batches[j]))
        if len(batches[biggest]) < 2:
            return batches + [batches[j % len(batches)] for j in range(num_replicas - len(batches) % num_replicas)]
        b = batches[biggest]
        batches[biggest : biggest + 1] = [b[: len(b) // 2], b[len(b) // 2 :]]
    return batches


def test_batches_read_out_as_lists():
    batches = Batches(np.array([4, 2, 0, 1, 3]), np.array([0, 2, 2, 5]))
    assert len(batches) == 3 and batches.sizes().tolist() == [2, 0, 3]
    assert list(batches) == [[4, 2], [], [0, 1, 3]] and batches[-1] == [0, 1, 3] and batches[1:] == [[], [0, 1, 3]]
    assert batches == [[4, 2], [], [0, 1, 3]] and [[4, 2], [], [0, 1, 3]] == batches and batches != [[4, 2], [0, 1, 3]]
    assert Batches.of(batches) is batches and Batches.of([[4, 2], [], [0, 1, 3]]) == batches
    assert Batches.joined([batches, Batches.of([[7], [8, 9]])]) == [[4, 2], [], [0, 1, 3], [7], [8, 9]]
    assert all(type(i) is int for i in batches[0])  # what a DataLoader's batch sampler yields
    with pytest.raises(IndexError, match="batch 3 of 3"):
        batches[3]
    with pytest.raises(ValueError, match="bounds must run from 0 to 5"):
        Batches(np.arange(5), np.array([0, 4]))


@pytest.mark.parametrize("num_replicas", [1, 2, 3, 7, 64])
def test_even_out_equals_the_list_algorithm(num_replicas):
    rng = np.random.default_rng(num_replicas)
    for count in (1, 2, 5, 40, 301):
        sizes = rng.integers(1, 9, count)
        sizes[rng.integers(0, count)] = 1  # batches of one: a repeat where none is left to split
        ids = rng.permutation(int(sizes.sum()))
        lists = np.split(ids, np.cumsum(sizes)[:-1])
        evened = even_out(Batches(ids, np.cumsum([0, *sizes])), num_replicas)
        assert evened == reference_even_out(lists, num_replicas) and len(evened) % num_replicas == 0

"""Batches of example indices held as two arrays: the indices in batch order and the bounds
between batches. A corpus of 36M pairs packs into 365K batches: as lists of Python ints they took
about 4.5 GB, as arrays 0.3 GB (8 bytes an index). A batch read out is a list, as a DataLoader's
batch sampler yields."""

from collections.abc import Iterable, Iterator, Sequence
from typing import overload

import numpy as np


class Batches(Sequence[list[int]]):
    """`ids[bounds[j]:bounds[j + 1]]` is batch j; an index may appear in more than one batch (see
    `even_out`). Equal to any sequence of sequences that holds the same batches."""

    def __init__(self, ids: np.ndarray, bounds: np.ndarray) -> None:
        self.ids = np.asarray(ids, dtype=np.int64)
        self.bounds = np.asarray(bounds, dtype=np.int64)
        if self.bounds.ndim != 1 or len(self.bounds) < 1 or self.bounds[0] != 0 or self.bounds[-1] != len(self.ids):
            raise ValueError(f"bounds must run from 0 to {len(self.ids)}, got {self.bounds[:3]}...{self.bounds[-3:]}")

    @classmethod
    def of(cls, batches: Iterable[Sequence[int] | np.ndarray]) -> "Batches":
        """From batches given as lists (or from a Batches, as it is)."""
        if isinstance(batches, Batches):
            return batches
        parts = [np.asarray(b, dtype=np.int64).reshape(-1) for b in batches]
        bounds = np.cumsum([0, *(len(p) for p in parts)])
        return cls(np.concatenate(parts) if parts else np.zeros(0, np.int64), bounds)

    @classmethod
    def joined(cls, parts: Sequence["Batches"]) -> "Batches":
        """The batches of `parts`, one after another."""
        if not parts:
            return cls(np.zeros(0, np.int64), np.zeros(1, np.int64))
        offsets = np.cumsum([0, *(len(p.ids) for p in parts[:-1])])
        bounds = [parts[0].bounds[:1], *(p.bounds[1:] + off for p, off in zip(parts, offsets))]
        return cls(np.concatenate([p.ids for p in parts]), np.concatenate(bounds))

    def __len__(self) -> int:
        return len(self.bounds) - 1

    @overload
    def __getitem__(self, j: int) -> list[int]: ...
    @overload
    def __getitem__(self, j: slice) -> list[list[int]]: ...
    def __getitem__(self, j: int | slice) -> list[int] | list[list[int]]:
        if isinstance(j, slice):
            return [self[k] for k in range(*j.indices(len(self)))]
        if not -len(self) <= j < len(self):
            raise IndexError(f"batch {j} of {len(self)}")
        j = int(j) % len(self)
        return self.ids[self.bounds[j] : self.bounds[j + 1]].tolist()

    def __iter__(self) -> Iterator[list[int]]:
        return (self[j] for j in range(len(self)))

    def sizes(self) -> np.ndarray:
        """(len(self),) the number of examples in each batch."""
        return np.diff(self.bounds)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Batches):
            return bool(np.array_equal(self.bounds, other.bounds) and np.array_equal(self.ids, other.ids))
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and all(a == list(b) for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable arrays inside, as a list

    def __repr__(self) -> str:
        shown = ", ".join(str(b) for b in self[:3])
        return f"Batches({len(self)} batches of {len(self.ids)} indices: {shown}{', ...' if len(self) > 3 else ''})"


def even_out(batches: Iterable[Sequence[int] | np.ndarray], num_replicas: int) -> Batches:
    """The batches, split (or, failing that, repeated) until their count divides by num_replicas:
    while it does not, the first of the largest batches is halved; when no batch has two examples
    left, the first batches are repeated (cycling through them where there are fewer batches than
    ranks, so that every rank gets one)."""
    batches = Batches.of(batches)
    ids, bounds = batches.ids, batches.bounds
    while (len(bounds) - 1) % num_replicas:
        sizes = np.diff(bounds)
        biggest = int(sizes.argmax())  # the first of the largest
        if sizes[biggest] < 2:
            count = len(bounds) - 1
            again = np.arange(num_replicas - count % num_replicas) % count  # the first ones, cycling if need be
            return Batches.joined([Batches(ids, bounds), Batches.of(ids[bounds[j] : bounds[j + 1]] for j in again)])
        bounds = np.insert(bounds, biggest + 1, bounds[biggest] + sizes[biggest] // 2)
    return Batches(ids, bounds)

"""Token id sequences of different lengths stored as one flat array plus offsets.

A list of millions of small arrays costs ~100 bytes of Python overhead each and pickles slowly
into DataLoader workers; two flat arrays cost nothing per sentence, save as two .npy files
and load memory-mapped.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass(frozen=True, eq=False)
class RaggedIds(Sequence[np.ndarray]):
    """Sequence i is `flat[offsets[i]:offsets[i + 1]]`."""

    flat: np.ndarray  # (total_tokens,) int32
    offsets: np.ndarray  # (n + 1,) int64, offsets[0] == 0, non-decreasing
    files: tuple[Path, Path] | None = field(default=None, repr=False)  # the .npy files of flat and offsets, if mapped

    @classmethod
    def open(cls, flat: Path, offsets: Path) -> "RaggedIds":
        """Memory-maps two .npy files: nothing is read until used, and every process that maps
        them (DataLoader workers, ranks, sweep trials) shares their pages in the page cache."""
        return cls(flat=np.load(flat, mmap_mode="r"), offsets=np.load(offsets, mmap_mode="r"), files=(Path(flat), Path(offsets)))

    def __reduce__(self) -> tuple:
        """A mapped RaggedIds pickles as its file names: DataLoader workers started by spawn or
        forkserver map the files again instead of receiving a copy of every id."""
        if self.files is not None:
            return (RaggedIds.open, self.files)
        return (RaggedIds, (self.flat, self.offsets))

    def __post_init__(self) -> None:
        if self.offsets.ndim != 1 or len(self.offsets) == 0 or self.offsets[0] != 0:
            raise ValueError("RaggedIds: offsets must be a 1-D array starting at 0")
        if self.offsets[-1] != len(self.flat):
            raise ValueError(f"RaggedIds: offsets end at {self.offsets[-1]} but flat has {len(self.flat)} ids")

    @classmethod
    def from_lists(cls, seqs: Iterable[Sequence[int]]) -> "RaggedIds":
        seqs = list(seqs)
        lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.fromiter((t for s in seqs for t in s), dtype=np.int32, count=int(offsets[-1]))
        return cls(flat=flat, offsets=offsets)

    @classmethod
    def from_chunks(cls, flats: Sequence[np.ndarray], lengths: Sequence[np.ndarray]) -> "RaggedIds":
        """Consecutive pieces, each a flat array of ids and the lengths of its sequences."""
        lengths_all = np.concatenate([np.zeros(0, dtype=np.int64), *lengths])
        offsets = np.zeros(len(lengths_all) + 1, dtype=np.int64)
        np.cumsum(lengths_all, out=offsets[1:])
        return cls(flat=np.concatenate([np.zeros(0, dtype=np.int32), *flats]), offsets=offsets)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:  # type: ignore[override]
        if not -len(self) <= i < len(self):
            raise IndexError(f"RaggedIds index {i} out of range for {len(self)} sequences")
        i %= len(self)
        return self.flat[self.offsets[i] : self.offsets[i + 1]]

    def tolists(self) -> list[list[int]]:
        return [self[i].tolist() for i in range(len(self))]

"""Token id sequences of different lengths stored as one flat array plus offsets.

A list of millions of small arrays costs ~100 bytes of Python overhead each and pickles slowly
into DataLoader workers; two flat arrays cost nothing per sentence and save to one .npz.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class RaggedIds(Sequence[np.ndarray]):
    """Sequence i is `flat[offsets[i]:offsets[i + 1]]`."""

    flat: np.ndarray  # (total_tokens,) int32
    offsets: np.ndarray  # (n + 1,) int64, offsets[0] == 0, non-decreasing

    def __post_init__(self) -> None:
        if self.offsets.ndim != 1 or len(self.offsets) == 0 or self.offsets[0] != 0:
            raise ValueError("RaggedIds: offsets must be a 1-D array starting at 0")
        if self.offsets[-1] != len(self.flat):
            raise ValueError(
                f"RaggedIds: offsets end at {self.offsets[-1]} but flat has {len(self.flat)} ids"
            )

    @classmethod
    def from_lists(cls, seqs: Iterable[Sequence[int]]) -> "RaggedIds":
        seqs = list(seqs)
        lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.fromiter((t for s in seqs for t in s), dtype=np.int32, count=int(offsets[-1]))
        return cls(flat=flat, offsets=offsets)

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

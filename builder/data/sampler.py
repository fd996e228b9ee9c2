"""Batches by tokens with length bucketing, fairseq-style, distributed-aware and resumable.

How the batches are made (once, from `seed`; only their order changes per epoch):
  1. with `shuffle`, a random permutation of the examples (it breaks ties in step 2 at random);
  2. cut into buckets of `bucket_size` examples (None: one bucket, i.e. a global sort), each
     sorted by (source length, target length);
  3. packed greedily so that len(batch) * max(longest source, longest target) <= max_tokens,
     the padded size of the batch; an example longer than max_tokens on its own gets a batch alone;
  4. evened out for `num_replicas` ranks: while the count is not a multiple of num_replicas the
     batch with the most examples is halved (halves stay within budget), so every rank gets the
     same number of batches and every example is seen exactly once per epoch. Only when no batch
     has two examples left (fewer examples than ranks, say) are the first batches repeated.
With `buckets` (widths, data.static_shapes: builder/data/buckets.py) steps 2 and 3 put each
pair in the first bucket as wide as it and cut each bucket into batches of max_tokens // width
pairs, keeping step 1's order.
Per epoch the batch order is shuffled with `seed + epoch`; rank r takes batches r, r + R, ...
Without `shuffle` (evaluation) the batches stay in length order; `Batch.ids` restores input order.

The packing is fixed across epochs, as fairseq's: the number of batches per epoch is constant,
which Lightning relies on (it reads len(dataloader) once) and which makes resuming exact.
"""

import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from torch.utils.data import Sampler

from aiayn.builder.data.batches import Batches, even_out
from aiayn.builder.data.buckets import bucket_batches
from aiayn.builder.errors import UserError


def pack(order: np.ndarray, src_lengths: np.ndarray, tgt_lengths: np.ndarray, max_tokens: int) -> Batches:
    """Greedy token-budget packing of `order` (already sorted), keeping its order.

    Each batch takes the next examples while (examples + 1) x longest <= max_tokens. That padded
    size only grows as a batch grows, so a batch's size is how many of the running maxima over the
    examples after its start pass the test: one numpy pass per batch, not a Python step per
    example (benchmarks/data_scale.py packs WMT's 4.5M pairs).
    """
    widths = np.maximum(src_lengths[order], tgt_lengths[order])  # (N,) padded width of each example alone
    counts = np.arange(1, len(order) + 1)  # (N,) examples in a batch
    bounds, start, n = [0], 0, len(order)
    while start < n:
        first = int(widths[start])
        # the running maximum is >= first, so no batch holds more than max_tokens // first examples
        end = n if first == 0 else min(n, start + max_tokens // first + 1)
        padded = counts[: end - start] * np.maximum.accumulate(widths[start:end])  # non-decreasing
        start += max(int(padded.searchsorted(max_tokens, side="right")), 1)  # one over budget: alone
        bounds.append(start)
    return Batches(order, np.asarray(bounds))


def by_lengths(src: np.ndarray, tgt: np.ndarray) -> np.ndarray:
    """np.lexsort((tgt, src)): by source length, then target length, ties in their order. Lengths
    under 2**16 sort as two stable radix sorts of uint16 (numpy's for 16-bit keys): 36M pairs in a
    third of lexsort's time."""
    if len(src) and max(int(src.max()), int(tgt.max())) < 1 << 16 and min(int(src.min()), int(tgt.min())) >= 0:
        by_tgt = np.argsort(tgt.astype(np.uint16), kind="stable")
        return by_tgt[np.argsort(src.astype(np.uint16)[by_tgt], kind="stable")]
    return np.lexsort((tgt, src))


class TokenBatchSampler(Sampler[list[int]]):
    """Yields lists of dataset indices; see the module docstring for how they are made.

    `src_lengths` / `tgt_lengths` are the lengths of the tensors the collate function will build
    (for the decoder that is the target length + 1, for the added bos/eos).

    Resuming: `state_dict()` records the epoch and how many of this rank's batches were consumed;
    after `load_state_dict`, iterating that epoch yields only the rest. The count is the number of
    batches this sampler has yielded; a DataLoader with workers runs ahead of the training loop,
    so an owner that knows better passes `consumed` (TranslationDataModule counts the batches
    that reach the model). `len()` is always the full epoch, as Lightning expects on resume.
    """

    def __init__(
        self,
        src_lengths: Sequence[int] | np.ndarray,
        tgt_lengths: Sequence[int] | np.ndarray,
        *,
        max_tokens: int,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
        bucket_size: int | None = None,
        buckets: Sequence[int] | None = None,
    ) -> None:
        src = np.asarray(src_lengths, dtype=np.int64)
        tgt = np.asarray(tgt_lengths, dtype=np.int64)
        if src.shape != tgt.shape or src.ndim != 1:
            raise ValueError(f"src_lengths {src.shape} and tgt_lengths {tgt.shape} must be equal 1-D")
        if len(src) == 0:
            raise ValueError("TokenBatchSampler needs at least one example")
        if max_tokens < 1:
            raise UserError(f"max_tokens per batch must be at least 1, got {max_tokens}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} must be in [0, num_replicas={num_replicas})")
        if bucket_size is not None and bucket_size < 1:
            raise ValueError(f"bucket_size must be positive or None, got {bucket_size}")
        self.max_tokens, self.shuffle, self.seed = max_tokens, shuffle, seed
        self.num_replicas, self.rank, self.bucket_size = num_replicas, rank, bucket_size
        self.buckets = None if buckets is None else [int(w) for w in buckets]
        self.num_examples = len(src)
        self.batches = even_out(self._pack(src, tgt), num_replicas)  # all ranks' batches
        self.epoch = 0
        self._start = 0  # batches of this epoch to skip, set by load_state_dict
        self._consumed = 0  # of this rank's batches in self.epoch

    def _pack(self, src: np.ndarray, tgt: np.ndarray) -> Batches:
        if self.shuffle:
            order = np.random.default_rng(self.seed).permutation(len(src))
        else:
            order = np.arange(len(src))
        if self.buckets is not None:
            return bucket_batches(order, np.maximum(src, tgt), self.buckets, self.max_tokens)
        step = self.bucket_size or len(src)
        parts = []
        for start in range(0, len(order), step):
            bucket = order[start : start + step]
            parts.append(pack(bucket[by_lengths(src[bucket], tgt[bucket])], src, tgt, self.max_tokens))
        return Batches.joined(parts)

    def _epoch_order(self) -> np.ndarray:
        """The indices of this rank's batches of the current epoch, in order."""
        order = np.arange(len(self.batches))
        if self.shuffle:
            order = np.random.default_rng(self.seed + self.epoch).permutation(len(self.batches))
        return order[self.rank :: self.num_replicas]

    def epoch_batches(self) -> list[list[int]]:
        """This rank's batches of the current epoch, in order, including consumed ones."""
        return [self.batches[j] for j in self._epoch_order()]

    def __iter__(self) -> Iterator[list[int]]:
        start, self._start = self._start, 0  # a resumed position applies to one iteration only
        self._consumed = start
        for j in self._epoch_order()[start:]:  # a batch made a list only when it is drawn
            self._consumed += 1
            yield self.batches[int(j)]

    def __len__(self) -> int:
        return len(self.batches) // self.num_replicas

    @property
    def consumed(self) -> int:
        """This rank's batches of the current epoch yielded so far (or skipped by a resume)."""
        return self._consumed

    def set_epoch(self, epoch: int) -> None:
        """Called by Lightning at every epoch start; a new epoch starts from its first batch."""
        if epoch != self.epoch:
            self.epoch, self._start, self._consumed = epoch, 0, 0

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "consumed": self._consumed if consumed is None else consumed,
            "fingerprint": self._fingerprint(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The next iteration continues where `state` left off.

        A finished epoch resumes at the start of the next one: Lightning creates the first
        iterator before it calls set_epoch, and DataLoader workers start drawing from it at once.
        A state from a differently built sampler (other data, max_tokens, seed or number of ranks)
        cannot be mapped onto this one's batches: its epoch starts over, with a warning.
        """
        epoch, consumed = int(state["epoch"]), int(state["consumed"])
        if state.get("fingerprint") != self._fingerprint():
            warnings.warn(
                f"the batch sampler state was saved with {state.get('fingerprint')} and does not "
                f"fit this sampler ({self._fingerprint()}); epoch {epoch} starts over",
                stacklevel=2,
            )
            consumed = 0
        if consumed >= len(self):
            epoch, consumed = epoch + 1, 0
        self.epoch, self._start, self._consumed = epoch, consumed, consumed

    def _fingerprint(self) -> dict[str, Any]:
        return {
            "num_examples": self.num_examples,
            "num_batches": len(self.batches),
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "num_replicas": self.num_replicas,
            **({"buckets": self.buckets} if self.buckets is not None else {}),
        }

"""Static shapes (data.static_shapes): every training batch takes one of a few fixed shapes, so
that a compiled step is compiled once per shape and CUDA graphs replay.

tf.data's bucket_by_sequence_length(pad_to_bucket_boundary=True), with a fixed row count:
  - a pair's width is its longer side (the target counted with its <s> or </s>); it goes to the
    first bucket at least that wide (`bucket_widths`: the widths that pad the training pairs
    least, or the YAML's boundaries; the longest pair's width last);
  - a bucket of width w makes batches of max_tokens // w pairs in the sampler's shuffled order
    (`bucket_batches`), so a batch's padded size stays within max_tokens as without buckets;
  - `StaticCollator` pads every batch to its bucket's (rows, w): a bucket's last batch gets filler
    rows (one source token, target all padding: the loss never sees them, and every attention
    has a key), and the packed rows the encoder and decoder compute are padded to a fixed count
    per bucket with padding positions (the most real tokens any of the bucket's batches holds,
    rounded up to 8; `bucket_shapes`). Padding positions are exact: the loss weighs their
    targets 0, keys there are masked (the encoder's padding mask, the decoder's causal mask:
    they come after every real token of their row). An encoder that would compute every
    position gets src_rows None instead: rows as many as the positions mean "no padding" to
    the model, which then masks nothing.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from aiayn.builder.data.batches import Batches
from aiayn.builder.data.collate import Batch, TranslationCollator, padded, rows_of
from aiayn.builder.data.dataset import Example

PACKED_MULTIPLE = 8  # packed token counts are rounded up to this


@dataclass(frozen=True)
class BucketShape:
    width: int  # tokens per row, both sides
    rows: int  # pairs per batch (filler rows included)
    src_tokens: int  # the encoder's packed rows: real tokens and padding positions
    tgt_tokens: int  # the decoder's packed rows

    @property
    def shape(self) -> tuple[int, int]:
        return self.rows, self.width


def bucket_widths(widths: np.ndarray, *, num_buckets: int, boundaries: Sequence[int] | None, multiple: int = 1) -> list[int]:
    """The buckets' widths, ascending, rounded up to `multiple`: `boundaries` and the longest
    pair's width where it is wider, or the `num_buckets` widths that pad the pairs (`widths`)
    least: the widths w_1 < ... < w_k = the longest minimising sum over pairs of their bucket's
    width, by dynamic programming over the distinct widths (k x n^2 for n of them, n <= max_len)."""

    def up(w: np.ndarray) -> np.ndarray:
        return -(-w // multiple) * multiple

    rounded = up(np.asarray(widths, dtype=np.int64))
    longest = int(rounded.max())
    if boundaries is not None:
        return sorted({int(w) for w in up(np.asarray(boundaries, dtype=np.int64)) if w < longest}) + [longest]
    values, counts = np.unique(rounded, return_counts=True)  # candidates: the widths that occur
    n, huge = len(values), np.iinfo(np.int64).max // 4
    upto = np.cumsum(counts)  # upto[j]: pairs at most values[j] wide
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    # after[i, j]: the padded size of the pairs wider than values[i], up to values[j], in one bucket of values[j]
    after = np.where(i < j, values[j] * (upto[j] - upto[i]), huge)
    best = values * upto  # best[j]: the least padded size of the pairs up to values[j] in k buckets (k = 1)
    splits = []
    for _ in range(min(num_buckets, n) - 1):  # one bucket more: values[i + 1..j], after the best of values[..i]
        total = best[:, None] + after
        splits.append(total.argmin(0))
        best = total.min(0)
    edges, last = [int(values[-1])], n - 1
    for split in reversed(splits):  # the last bucket's lower neighbour, back to the first bucket
        last = int(split[last])
        edges.append(int(values[last]))
    return sorted(edges)


def bucket_rows(width: int, max_tokens: int) -> int:
    """Pairs a batch of a bucket `width` wide holds: its padded size stays within max_tokens."""
    return max(1, max_tokens // width)


def bucket_of(widths: np.ndarray, buckets: Sequence[int]) -> np.ndarray:
    """The index of the first bucket at least as wide as each pair (every pair fits the last)."""
    return np.searchsorted(np.asarray(buckets), widths, side="left")


def bucket_batches(order: np.ndarray, widths: np.ndarray, buckets: Sequence[int], max_tokens: int) -> Batches:
    """`order` (shuffled positions) cut into batches of max_tokens // width pairs of one bucket,
    keeping the order within each bucket: pairs of random lengths within a bucket make the real
    token counts of its batches alike, and the fixed packed count (their most) tight."""
    which = bucket_of(widths[order], buckets)
    parts = []
    for b, width in enumerate(buckets):
        ids = order[which == b]
        rows = bucket_rows(width, max_tokens)
        parts.append(Batches(ids, np.append(np.arange(0, len(ids), rows), len(ids))))  # [0] for an empty bucket
    return Batches.joined(parts)


def bucket_shapes(
    batches: Sequence[Sequence[int]], src: np.ndarray, tgt: np.ndarray, buckets: Sequence[int], max_tokens: int, *, packed: bool
) -> tuple[BucketShape, ...]:
    """Each bucket's shape; `src` / `tgt` the lengths of the tensors (tgt with its <s>)."""
    most = np.zeros((len(buckets), 2), dtype=np.int64)  # real tokens of a bucket's fullest batch
    for batch in batches:
        ids = np.asarray(batch)
        b = int(bucket_of(np.maximum(src[ids], tgt[ids]).max(keepdims=True), buckets)[0])
        filler = bucket_rows(buckets[b], max_tokens) - len(ids)  # one source token each, no target token
        most[b] = np.maximum(most[b], [int(src[ids].sum()) + filler, int(tgt[ids].sum())])
    shapes = []
    for b, width in enumerate(buckets):
        rows = bucket_rows(width, max_tokens)
        full = rows * width
        src_n, tgt_n = (-(-most[b] // PACKED_MULTIPLE) * PACKED_MULTIPLE).tolist() if packed else (full, full)
        shapes.append(
            BucketShape(width=width, rows=rows, src_tokens=min(max(src_n, 1), full), tgt_tokens=min(max(tgt_n, 1), full))
        )
    return tuple(shapes)


def shape_for(shapes: Sequence[BucketShape], longest: int, rows: int, what: str) -> BucketShape:
    """The shape of the first bucket at least `longest` wide, which must hold `rows` rows (of `what`)."""
    b = int(bucket_of(np.asarray([longest]), [s.width for s in shapes])[0])
    if b == len(shapes):
        raise ValueError(f"a {what} of {longest} tokens is wider than the widest bucket ({shapes[-1].width})")
    if rows > shapes[b].rows:
        raise ValueError(f"{rows} {what}s do not fit the {shapes[b].rows} rows of bucket {b} (width {shapes[b].width})")
    return shapes[b]


class StaticCollator(TranslationCollator):
    """The training `collate_fn` under static shapes: every batch padded to its bucket's shape."""

    def __init__(self, shapes: Sequence[BucketShape], *, pad_id: int, bos_id: int, eos_id: int) -> None:
        super().__init__(pad_id=pad_id, bos_id=bos_id, eos_id=eos_id)
        self.shapes = tuple(shapes)

    def __call__(self, examples: Sequence[Example]) -> Batch:
        shape = shape_for(self.shapes, max(max(len(e.src), len(e.tgt) + 1) for e in examples), len(examples), "pair")
        src = [e.src for e in examples] + [np.asarray([self.eos_id])] * (shape.rows - len(examples))  # fillers
        tgt = [e.tgt for e in examples]
        tgt_lengths = [len(t) + 1 for t in tgt] + [0] * (shape.rows - len(examples))
        src_lengths = [len(s) for s in src]
        blank = [np.zeros(0, dtype=np.int64)] * (shape.rows - len(examples))  # a filler's decoder input is <s> alone
        return Batch(
            src=padded(src, self.pad_id, before=None, after=None, width=shape.width),
            tgt_in=padded(tgt + blank, self.pad_id, before=self.bos_id, after=None, width=shape.width),
            tgt_out=padded(tgt, self.pad_id, before=None, after=self.eos_id, width=shape.width, n_rows=shape.rows),
            ids=torch.tensor([e.id for e in examples] + [-1] * (shape.rows - len(examples)), dtype=torch.long),
            n_src_tokens=sum(len(e.src) for e in examples),
            n_tgt_tokens=sum(tgt_lengths),
            tgt_rows=_fixed_rows(tgt_lengths, shape.width, shape.tgt_tokens),
            src_rows=None
            if shape.src_tokens == shape.rows * shape.width
            else _fixed_rows(src_lengths, shape.width, shape.src_tokens),
        )


def _fixed_rows(lengths: Sequence[int], width: int, count: int) -> torch.Tensor:
    """The flat indices of the real tokens (`rows_of`), then padding positions, `count` in all."""
    real = rows_of(lengths, width)
    if len(real) > count:
        raise ValueError(f"{len(real)} tokens do not fit the bucket's {count} packed rows")
    taken = np.zeros(len(lengths) * width, dtype=bool)
    taken[real.numpy()] = True
    extra = np.flatnonzero(~taken)[: count - len(real)]
    return torch.cat([real, torch.from_numpy(extra)])

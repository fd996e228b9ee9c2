"""Static shapes (data.static_shapes) for a decoder-only model's sentence batches: a decoder-only
translation's `<s> x <sep> y` and a language model's `<s> y`, each row one sequence, every batch
padded to one of a few fixed (rows, width) shapes as buckets.py does for the encoder-decoder's
pairs, so that a compiled step is compiled once per shape and CUDA graphs replay.

  - a row's width is its sequence's (tgt_in's: `<s> x <sep> y` or `<s> y`); buckets are the
    widths that pad the training rows least (or the YAML's boundaries), the longest last;
  - a bucket of width w holds 2 * max_tokens // w rows for a translation (train.tokens_per_step
    counts a side, and a row holds both) and max_tokens // w for a language model's sentences;
  - a bucket's last batch gets filler rows (`<s>` alone, no target: the loss never sees them);
    the rows the output projection and the loss compute (`tgt_rows`) are padded to a fixed count
    per bucket with positions whose target is padding, which the loss weighs 0.
"""

from collections.abc import Sequence

import numpy as np
import torch

from aiayn.builder.data.buckets import (
    PACKED_MULTIPLE,
    BucketShape,
    bucket_of,
    bucket_rows,
    bucket_widths,
    shape_for,
)
from aiayn.builder.data.collate import Batch, padded
from aiayn.builder.data.dataset import Example
from aiayn.builder.data.reading import Batching
from aiayn.builder.data.sampler import TokenBatchSampler
from aiayn.builder.graphs.joint import JointLayout, sequences_of
from aiayn.schemas.data import StaticShapesSpec


def sequence_shapes(
    batches: Sequence[Sequence[int]],
    widths: np.ndarray,
    losses: np.ndarray,
    buckets: Sequence[int],
    max_tokens: int,
    *,
    packed: bool,
) -> tuple[BucketShape, ...]:
    """Each bucket's shape: its rows and width, and the loss's rows (the most any of its batches
    counts, rounded up to PACKED_MULTIPLE; every position where not `packed`). No source rows."""
    most = np.zeros(len(buckets), dtype=np.int64)
    for batch in batches:
        ids = np.asarray(batch)
        b = int(bucket_of(widths[ids].max(keepdims=True), buckets)[0])
        most[b] = max(most[b], int(losses[ids].sum()))
    shapes = []
    for b, width in enumerate(buckets):
        rows = bucket_rows(width, max_tokens)
        full = rows * width
        count = int(-(-most[b] // PACKED_MULTIPLE) * PACKED_MULTIPLE) if packed else full
        shapes.append(BucketShape(width=width, rows=rows, src_tokens=0, tgt_tokens=min(max(count, 1), full)))
    return tuple(shapes)


class StaticSequenceCollator:
    """The training `collate_fn` of a decoder-only model under static shapes: every batch padded
    to its bucket's shape (`joint`: a translation's layout; None: a language model's sentences)."""

    def __init__(
        self,
        shapes: Sequence[BucketShape],
        joint: JointLayout | None,
        *,
        sep_id: int | None,
        pad_id: int = 0,
        bos_id: int = 1,
        eos_id: int = 2,
    ) -> None:
        self.shapes, self.joint, self.sep_id = tuple(shapes), joint, sep_id
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id

    def __call__(self, examples: Sequence[Example]) -> Batch:
        inputs, targets, prefix = sequences_of(
            examples, self.joint, sep_id=self.sep_id, pad_id=self.pad_id, bos_id=self.bos_id, eos_id=self.eos_id
        )
        shape = shape_for(self.shapes, max(len(row) for row in inputs), len(examples), "sequence")
        fillers = shape.rows - len(examples)
        tgt_out = padded(targets, self.pad_id, before=None, after=None, width=shape.width, n_rows=shape.rows)
        kept = np.flatnonzero(tgt_out.flatten().numpy() != self.pad_id)
        if len(kept) > shape.tgt_tokens:
            raise ValueError(f"{len(kept)} target tokens do not fit the bucket's {shape.tgt_tokens} packed rows")
        extra = np.setdiff1d(np.arange(shape.rows * shape.width), kept)[: shape.tgt_tokens - len(kept)]  # targets: padding
        with_fillers = [*inputs, *([np.asarray([self.bos_id])] * fillers)]
        return Batch(
            src=torch.zeros(shape.rows, 0, dtype=torch.long),
            tgt_in=padded(with_fillers, self.pad_id, before=None, after=None, width=shape.width),
            tgt_out=tgt_out,
            ids=torch.tensor([e.id for e in examples] + [-1] * fillers, dtype=torch.long),
            n_src_tokens=sum(len(e.src) for e in examples),
            n_tgt_tokens=len(kept),
            tgt_rows=torch.from_numpy(np.concatenate([kept, extra]).astype(np.int64)),
            src_rows=None,
            prefix=None if prefix is None else torch.tensor([*prefix, *([1] * fillers)], dtype=torch.long),
        )


def static_sequence_batches(
    lengths: np.ndarray,
    losses: np.ndarray,
    static: StaticShapesSpec,
    batching: Batching,
    *,
    max_tokens: int,
    joint: JointLayout | None,
    sep_id: int | None,
) -> tuple[TokenBatchSampler, tuple[BucketShape, ...], StaticSequenceCollator]:
    """The training sampler, the buckets' shapes and the collator under static shapes for a
    decoder-only model's rows: `lengths` each row's width, `losses` the tokens its loss counts,
    `max_tokens` the budget of a batch (`joint`: a translation's layout; None: a language model's)."""
    buckets = bucket_widths(
        lengths, num_buckets=static.num_buckets, boundaries=static.bucket_boundaries, multiple=batching.multiple
    )
    sampler = batching.sampler(np.zeros_like(lengths), lengths, buckets, max_tokens)
    shapes = sequence_shapes(sampler.batches, lengths, losses, buckets, max_tokens, packed=static.packed)
    return sampler, shapes, StaticSequenceCollator(shapes, joint, sep_id=sep_id)

"""Examples -> padded tensors: the encoder input, and the decoder's shifted input and output."""

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from aiayn.builder.data.dataset import Example


class Batch(NamedTuple):
    """A NamedTuple, so Lightning moves its tensors to the device without copying the rest."""

    src: torch.Tensor  # (B, S) long: x, padded
    tgt_in: torch.Tensor  # (B, T) long: [bos] + y, padded (the decoder input)
    tgt_out: torch.Tensor  # (B, T) long: y + [eos], padded (the prediction targets)
    ids: torch.Tensor  # (B,) long: line numbers in the corpus files, to restore input order
    n_src_tokens: int  # non-pad tokens in src
    n_tgt_tokens: int  # non-pad tokens in tgt_out: the number of predictions the loss averages
    tgt_rows: torch.Tensor  # (n_tgt_tokens,) long: flat indices into tgt_out of its non-pad tokens
    # (n_src_tokens,) long: flat indices into src of its non-pad tokens (builder/data/buckets.py: and
    # padding positions after them, or None: every position, the padding masked)
    src_rows: torch.Tensor | None
    # (B,): each row's prefix read both ways (a decoder-only translation's `<s> x <sep>` under
    # model.source_mask: prefix; builder/graphs/joint.py); None: causal throughout
    prefix: torch.Tensor | None = None


def padded(
    rows: Sequence[np.ndarray],
    pad_id: int,
    *,
    before: int | None,
    after: int | None,
    multiple: int = 1,
    width: int | None = None,
    n_rows: int | None = None,
) -> torch.Tensor:
    """(n_rows or len(rows), width) right-padded: each row `before` + row + `after`. `width`
    None: the longest such row's, rounded up to `multiple`; n_rows: rows of padding below."""
    if width is None:
        width = max((len(r) for r in rows), default=0) + (before is not None) + (after is not None)
        width = -(-width // multiple) * multiple  # rounded up
    out = np.full((n_rows or len(rows), width), pad_id, dtype=np.int64)
    for b, row in enumerate(rows):
        start = 0
        if before is not None:
            out[b, 0], start = before, 1
        out[b, start : start + len(row)] = row
        if after is not None:
            out[b, start + len(row)] = after
    return torch.from_numpy(out)


class TranslationCollator:
    """The DataLoader's `collate_fn`: a list of `Example` -> `Batch`. Picklable for workers."""

    def __init__(self, *, pad_id: int, bos_id: int, eos_id: int, pad_to_multiple: int = 1) -> None:
        self.pad_id, self.bos_id, self.eos_id, self.multiple = pad_id, bos_id, eos_id, pad_to_multiple

    def __call__(self, examples: Sequence[Example]) -> Batch:
        src = [e.src for e in examples]
        tgt = [e.tgt for e in examples]
        tgt_out = padded(tgt, self.pad_id, before=None, after=self.eos_id, multiple=self.multiple)
        padded_src = padded(src, self.pad_id, before=None, after=None, multiple=self.multiple)
        return Batch(
            src=padded_src,
            tgt_in=padded(tgt, self.pad_id, before=self.bos_id, after=None, multiple=self.multiple),
            tgt_out=tgt_out,
            ids=torch.tensor([e.id for e in examples], dtype=torch.long),
            n_src_tokens=sum(len(s) for s in src),
            n_tgt_tokens=sum(len(t) + 1 for t in tgt),
            tgt_rows=rows_of([len(t) + 1 for t in tgt], tgt_out.size(1)),
            src_rows=rows_of([len(s) for s in src], padded_src.size(1)),
        )


def rows_of(lengths: Sequence[int], width: int) -> torch.Tensor:
    """Flat indices into a (len(lengths), width) right-padded matrix of its first lengths[b] columns."""
    counts = np.asarray(lengths, dtype=np.int64)
    starts = np.repeat(np.arange(len(counts), dtype=np.int64) * width - np.cumsum(counts) + counts, counts)
    return torch.from_numpy(starts + np.arange(int(counts.sum()), dtype=np.int64))

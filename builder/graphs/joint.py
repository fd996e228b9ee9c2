"""A decoder-only model's translation pairs as one sequence a row: `<s> x <sep> y </s>` (Gao et
al. 2022; Raffel et al. 2020's prefix LM for translation). The decoder reads `<s> x <sep> y` and
predicts `x <sep> y </s>`; the loss counts the target's tokens and </s> (`source_loss`: the
source's and <sep> too, a language model of the pair). `prefix`: each row's `<s> x <sep>` is a
prefix every query reads (model.source_mask: prefix), its length in Batch.prefix."""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from aiayn.builder.data.collate import Batch, padded
from aiayn.builder.data.dataset import Example


@dataclass(frozen=True)
class JointLayout:
    source_loss: bool = False
    prefix: bool = False
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2


class JointCollator:
    """Pairs -> Batch with no source (src has 0 columns): tgt_in `<s> x <sep> y`, tgt_out the next
    tokens, padding where no loss is taken. Picklable for workers."""

    def __init__(self, layout: JointLayout, *, sep_id: int, pad_to_multiple: int = 1) -> None:
        self.layout, self.sep_id, self.multiple = layout, sep_id, pad_to_multiple

    def __call__(self, examples: Sequence[Example]) -> Batch:
        L = self.layout
        inputs, targets, prefix = sequences_of(examples, L, sep_id=self.sep_id, pad_id=L.pad_id, bos_id=L.bos_id, eos_id=L.eos_id)
        tgt_out = padded(targets, L.pad_id, before=None, after=None, multiple=self.multiple)
        kept = [np.flatnonzero(t != L.pad_id) for t in targets]
        width = tgt_out.size(1)
        return Batch(
            src=torch.zeros(len(examples), 0, dtype=torch.long),
            tgt_in=padded(inputs, L.pad_id, before=None, after=None, width=width),
            tgt_out=tgt_out,
            ids=torch.tensor([e.id for e in examples], dtype=torch.long),
            n_src_tokens=sum(len(e.src) for e in examples),
            n_tgt_tokens=sum(len(k) for k in kept),
            tgt_rows=torch.from_numpy(np.concatenate([b * width + k for b, k in enumerate(kept)]).astype(np.int64)),
            src_rows=None,
            prefix=None if prefix is None else torch.tensor(prefix, dtype=torch.long),
        )


def sequences_of(
    examples: Sequence[Example], layout: JointLayout | None, *, sep_id: int | None, pad_id: int, bos_id: int, eos_id: int
) -> tuple[list[np.ndarray], list[np.ndarray], list[int] | None]:
    """Each example as one row: (its input `<s> x <sep> y`, its targets `x <sep> y </s>` with the
    positions no loss is taken at set to padding, the prefix lengths `<s> x <sep>` where the layout
    reads the source as a prefix). `layout` None: a language model's sentence `<s> y`, `y </s>`."""
    if layout is None:
        rows = [np.concatenate([[bos_id], e.tgt, [eos_id]]).astype(np.int64) for e in examples]
        return [r[:-1] for r in rows], [r[1:] for r in rows], None
    rows = [np.concatenate([[bos_id], e.src, [sep_id], e.tgt, [eos_id]]).astype(np.int64) for e in examples]
    targets = []
    for e, row in zip(examples, rows):
        out = row[1:].copy()
        if not layout.source_loss:
            out[: len(e.src) + 1] = pad_id  # x and <sep> are read, not predicted
        targets.append(out)
    return [r[:-1] for r in rows], targets, [len(e.src) + 2 for e in examples] if layout.prefix else None

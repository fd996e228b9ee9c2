"""A tokenized parallel corpus, indexed by position, remembering each pair's line in the files."""

from collections.abc import Sequence
from typing import NamedTuple, overload

import numpy as np
from torch.utils.data import Dataset

from aiayn.builder.data.ragged import RaggedIds


class Example(NamedTuple):
    id: int  # 0-based line number in the corpus files
    src: np.ndarray  # (S,) int32 token ids, no specials (but </s> at the end with model.source_eos)
    tgt: np.ndarray  # (T,) int32 token ids, no specials


class TranslationDataset(Dataset):
    """The pairs `ids` (line numbers, default all) of the tokenized corpus `src` / `tgt`; with
    `source_eos`, every source ends with that token (model.source_eos), its length counting it.

    Indexing with a list of positions returns a list of examples: the DataLoader is built with
    `sampler=TokenBatchSampler, batch_size=None`, so each draw is a whole batch of positions (and
    Lightning finds the sampler at `dataloader.sampler` to call its `set_epoch`).
    """

    def __init__(
        self, src: RaggedIds, tgt: RaggedIds, ids: np.ndarray | None = None, *, source_eos: int | None = None, source: bool = True
    ) -> None:
        if len(src) != len(tgt):
            raise ValueError(f"TranslationDataset: {len(src)} sources but {len(tgt)} targets")
        self.src, self.tgt, self.source_eos = src, tgt, source_eos
        self.source = source  # False: a language model's sentences, every source empty
        self.ids = np.arange(len(src)) if ids is None else np.asarray(ids, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def src_lengths(self) -> np.ndarray:
        if not self.source:
            return np.zeros(len(self.ids), dtype=np.int64)
        return self.src.lengths[self.ids] + (self.source_eos is not None)

    @property
    def tgt_lengths(self) -> np.ndarray:
        return self.tgt.lengths[self.ids]

    @overload
    def __getitem__(self, position: int) -> Example: ...
    @overload
    def __getitem__(self, position: Sequence[int]) -> list[Example]: ...
    def __getitem__(self, position: int | Sequence[int]) -> Example | list[Example]:
        if isinstance(position, (int, np.integer)):
            i = int(self.ids[position])
            src = self.src[i] if self.source else self.tgt[i][:0]
            if self.source_eos is not None:
                src = np.append(src, np.asarray(self.source_eos, dtype=src.dtype))
            return Example(id=i, src=src, tgt=self.tgt[i])
        return [self[int(p)] for p in position]

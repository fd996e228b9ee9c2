"""A language model's text as contiguous blocks (GPT's packing; nanoGPT's, fairseq's
--sample-break-mode none): the sentences of a split joined into one stream, each followed by </s>
and the stream begun with <s>, cut into windows of block_size + 1 tokens that overlap by one, so
that every token but the first is predicted exactly once. A block is an Example whose target is
the window: the decoder reads its first block_size tokens and predicts its last block_size.
Sentence-level batches need none of this: their examples are a sentence each (`<s> ... </s>`)."""

from collections.abc import Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from aiayn.builder.data.collate import Batch, padded, rows_of
from aiayn.builder.data.dataset import Example
from aiayn.builder.data.ragged import RaggedIds


class BlockDataset(Dataset):
    """The blocks of `text` (token ids a sentence, no specials); indexed as a TranslationDataset
    is (a position, or a list of them: a batch), its sources empty."""

    def __init__(self, text: RaggedIds, block_size: int, *, bos_id: int, eos_id: int) -> None:
        lengths = np.asarray(text.lengths, dtype=np.int64)
        stream = np.empty(1 + int(lengths.sum()) + len(lengths), dtype=np.int32)
        stream[0] = bos_id
        ends = np.cumsum(lengths + 1)  # where each sentence's </s> goes, counted after the <s>
        stream[ends] = eos_id
        mask = np.ones(len(stream), dtype=bool)
        mask[0], mask[ends] = False, False
        stream[mask] = np.asarray(text.flat, dtype=np.int32)
        self.stream, self.block_size = stream, block_size
        starts = np.arange(0, max(len(stream) - 1, 1), block_size)
        self.starts = starts[starts < len(stream) - 1]
        self.ids = np.arange(len(self.starts))

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def tgt_lengths(self) -> np.ndarray:
        """Tokens each block predicts."""
        return np.minimum(self.block_size, len(self.stream) - 1 - self.starts)

    @property
    def src_lengths(self) -> np.ndarray:
        return np.zeros(len(self), dtype=np.int64)

    @property
    def predicted(self) -> int:
        """Tokens the blocks predict together: all of the stream's but its <s>."""
        return len(self.stream) - 1

    def __getitem__(self, position):  # int -> Example; a list of positions -> a list of them
        if isinstance(position, (int, np.integer)):
            start = int(self.starts[position])
            return Example(id=int(position), src=self.stream[:0], tgt=self.stream[start : start + self.block_size + 1])
        return [self[int(p)] for p in position]


class BlockCollator:
    """Blocks -> Batch: tgt_in a window's first tokens, tgt_out its next ones (no <s> or </s> added:
    the stream holds them), right-padded; no source."""

    def __init__(self, *, pad_id: int, pad_to_multiple: int = 1) -> None:
        self.pad_id, self.multiple = pad_id, pad_to_multiple

    def __call__(self, examples: Sequence[Example]) -> Batch:
        windows = [e.tgt for e in examples]
        tgt_out = padded([w[1:] for w in windows], self.pad_id, before=None, after=None, multiple=self.multiple)
        lengths = [len(w) - 1 for w in windows]
        return Batch(
            src=torch.zeros(len(windows), 0, dtype=torch.long),
            tgt_in=padded([w[:-1] for w in windows], self.pad_id, before=None, after=None, width=tgt_out.size(1)),
            tgt_out=tgt_out,
            ids=torch.tensor([e.id for e in examples], dtype=torch.long),
            n_src_tokens=0,
            n_tgt_tokens=sum(lengths),
            tgt_rows=rows_of(lengths, tgt_out.size(1)),
            src_rows=None,
        )


def text_bytes(lines: Sequence[str]) -> int:
    """UTF-8 bytes of the text, a newline after each line (what a model's </s> predicts)."""
    return sum(len(line.encode("utf-8")) + 1 for line in lines)

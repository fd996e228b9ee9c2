"""What the decoder-only graph's model reads (builder/data/reading.py's protocol): a pair as one
sequence `<s> x <sep> y` (a translation model, joint.py) or one language's text, sentences or
blocks of a stream (a language model). Each row is one sequence: static shapes bucket rows, not
pairs (static_sequences.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from aiayn.builder.data.contiguous import BlockCollator, BlockDataset, text_bytes
from aiayn.builder.data.corpus import read_lines
from aiayn.builder.data.dataset import TranslationDataset
from aiayn.builder.data.ragged import RaggedIds
from aiayn.builder.data.reading import Batching, Reading, SplitPaths, StaticBatches
from aiayn.builder.data.tokenizer import SEP, Tokenizer
from aiayn.builder.errors import UserError
from aiayn.builder.graphs.joint import JointCollator, JointLayout
from aiayn.builder.graphs.static_sequences import static_sequence_batches
from aiayn.schemas.data import StaticShapesSpec


class JointReading(Reading):
    """A translation pair as one sequence (`layout`): the pairs an encoder-decoder reads, each one row."""

    specials = (SEP,)

    def __init__(self, layout: JointLayout) -> None:
        self.layout = layout

    def __repr__(self) -> str:
        return f"JointReading({self.layout!r})"

    def check_tokenizer(self, tokenizer: Tokenizer) -> None:
        if tokenizer.sep_id is None:
            raise UserError(
                f"data: a decoder-only model translates <s> source {SEP} target, and the tokenizer has no {SEP}; train one "
                f"here (aiayn's tokenizers add it), or give data.tokenizer a file whose vocabulary has {SEP}"
            )

    def collate(self, tokenizer: Tokenizer, pad_to_multiple: int) -> Callable[..., Any]:
        self.check_tokenizer(tokenizer)
        assert tokenizer.sep_id is not None
        return JointCollator(self.layout, sep_id=tokenizer.sep_id, pad_to_multiple=pad_to_multiple)

    def eval_lengths(self, dataset: Any) -> tuple[np.ndarray, np.ndarray]:
        return dataset.src_lengths * 0, dataset.src_lengths + dataset.tgt_lengths + 2  # `<s> x <sep> y`, one side

    def static_batches(
        self, src: np.ndarray, tgt: np.ndarray, static: StaticShapesSpec, batching: Batching, tokenizer: Tokenizer
    ) -> StaticBatches:
        """A row holds both sides, which train.tokens_per_step counts apart: twice the budget a batch."""
        widths, y = src + tgt + 1, tgt - 1  # `<s> x <sep> y` of x and `<s> y`
        losses = src + y + 2 if self.layout.source_loss else y + 1
        return static_sequence_batches(
            widths, losses, static, batching, max_tokens=2 * batching.max_tokens, joint=self.layout, sep_id=tokenizer.sep_id
        )

    def on_target(self) -> JointReading:
        return JointReading(replace(self.layout, source_loss=False))


class TextReading(Reading):
    """One language's text (`side`): its file is both sides of each split; its sentences, or blocks of
    `block_size` tokens of the stream they make (None: sentences). Evaluation splits record the tokens
    predicted per byte of text and the sentences read (the DataModule's tokens_per_byte, sentences)."""

    def __init__(self, side: str, block_size: int | None) -> None:
        self.side, self.block_size = side, block_size

    def __repr__(self) -> str:
        return f"TextReading(side={self.side!r}, block_size={self.block_size})"

    def files(self, paths: SplitPaths) -> SplitPaths:
        text = next(p for p in paths if p.suffix == f".{self.side}")  # {split}.{side}
        return text, text

    def dataset(self, data: Any, split: str, src: RaggedIds, tgt: RaggedIds) -> Any:
        """Evaluation: every sentence with a token, or the blocks; training: the sentences max_len and min_len keep."""
        if self.block_size is not None:
            dataset: Any = BlockDataset(tgt, self.block_size, bos_id=Tokenizer.bos_id, eos_id=Tokenizer.eos_id)
            predicted = dataset.predicted
        else:
            dataset = sentences(data, split, tgt)
            if split == "train":
                return dataset
            predicted = int(dataset.tgt_lengths.sum()) + len(dataset)  # each sentence's tokens and its </s>
        lines = read_lines(data.texts(split)[1])
        covered = lines if self.block_size is not None else [lines[i] for i in dataset.ids]  # blocks: every line
        data.tokens_per_byte[split] = predicted / max(text_bytes(covered), 1)
        data.sentences[split] = sum(1 for line in covered if line.strip())
        return dataset

    def collate(self, tokenizer: Tokenizer, pad_to_multiple: int) -> Callable[..., Any] | None:
        return None if self.block_size is None else BlockCollator(pad_id=Tokenizer.pad_id, pad_to_multiple=pad_to_multiple)

    def static_batches(
        self, src: np.ndarray, tgt: np.ndarray, static: StaticShapesSpec, batching: Batching, tokenizer: Tokenizer
    ) -> StaticBatches:
        """A sentence's row is `<s> y`, its loss `y </s>`."""
        return static_sequence_batches(tgt, tgt, static, batching, max_tokens=batching.max_tokens, joint=None, sep_id=None)


def sentences(data: Any, split: str, text: RaggedIds) -> TranslationDataset:
    """A split of one language's encoded `text`, a sentence a row: evaluation's every sentence with a token,
    training's those data.max_len and data.min_len keep (`data`: the DataModule, whose length filter it is)."""
    if split != "train":
        return TranslationDataset(text, text, np.flatnonzero(text.lengths > 0), source=False)
    kept = data.length_filtered(
        text,
        text,
        "sentences",
        lambda counts: f"train sentences: kept {counts['kept']} of {len(text)} (max_len={data.max_len}, min_len={data.min_len})",
    )
    return TranslationDataset(text, text, kept, source=False)

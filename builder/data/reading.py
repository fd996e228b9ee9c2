"""What a model reads, as its graph says (`Graph.reading`): the files of a split, the specials its
tokenizer must have, each split's dataset, how a batch is laid out and how long its rows count for
the token budget, and the training batches' static shapes. The DataModule (datamodule.py) and the
teacher-forced scores (decode/metrics.py) ask a reading; none of them asks which graph they hold.

`Reading` itself is the encoder-decoder's: a pair read apart, the source by the encoder and `<s> y`
by the decoder. The decoder-only graph's two (a pair as one sequence, one language's text) are in
builder/graphs/; a plugin's graph hands the DataModule a reading of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aiayn.builder.data.buckets import BucketShape, StaticCollator, bucket_shapes, bucket_widths
from aiayn.builder.data.dataset import TranslationDataset
from aiayn.builder.data.ragged import RaggedIds
from aiayn.builder.data.sampler import TokenBatchSampler
from aiayn.builder.data.tokenizer import Tokenizer
from aiayn.schemas.data import StaticShapesSpec

SplitPaths = tuple[Path, Path]  # (source file, target file), line-aligned
StaticBatches = tuple[TokenBatchSampler, tuple[BucketShape, ...], Callable[..., Any]]  # sampler, shapes, collate_fn


@dataclass(frozen=True)
class Batching:
    """How the training batches are drawn: at most `max_tokens` padded tokens a side, widths padded to a
    `multiple`, shuffled with `seed`, rank `rank` of `num_replicas` taking its own share."""

    max_tokens: int
    multiple: int = 1
    seed: int = 0
    num_replicas: int = 1
    rank: int = 0

    def sampler(self, src: np.ndarray, tgt: np.ndarray, buckets: list[int], max_tokens: int | None = None) -> TokenBatchSampler:
        """The sampler of rows of these (source, target) lengths in `buckets` (`max_tokens`: another budget)."""
        return TokenBatchSampler(
            src,
            tgt,
            max_tokens=max_tokens or self.max_tokens,
            shuffle=True,
            buckets=buckets,
            seed=self.seed,
            num_replicas=self.num_replicas,
            rank=self.rank,
        )


class Reading:
    """A pair read apart: the source (ending in `source_eos` where the model has one) and `<s> y`."""

    specials: tuple[str, ...] = ()  # tokens a tokenizer trained for the run adds besides <pad> <s> </s> <unk>

    def files(self, paths: SplitPaths) -> SplitPaths:
        """The (source, target) files the model reads of a split's (source, target) files."""
        return paths

    def check_tokenizer(self, tokenizer: Tokenizer) -> None:
        """Raise a UserError where the (target) tokenizer lacks a token the reading needs."""

    def dataset(self, data: Any, split: str, src: RaggedIds, tgt: RaggedIds) -> Any:
        """A split's dataset of its encoded files (`data`: the TranslationDataModule, whose settings and
        length filter it uses): training's pairs are those the filter keeps; evaluation scores every pair
        with a source to attend to."""
        if split != "train":
            return TranslationDataset(src, tgt, np.flatnonzero(src.lengths > 0), source_eos=data.source_eos)
        kept = data.length_filtered(
            src,
            tgt,
            "pairs",
            lambda counts: (
                f"train pairs: kept {counts['kept']} of {len(src)}; removed {counts['too_long']} with a side "
                f"longer than max_len={data.max_len} tokens, {counts['too_short']} shorter than min_len={data.min_len}"
            ),
        )
        return TranslationDataset(src, tgt, kept, source_eos=data.source_eos)

    def collate(self, tokenizer: Tokenizer, pad_to_multiple: int) -> Callable[..., Any] | None:
        """The batches' collate_fn (None: loaders.py's TranslationCollator)."""
        return None

    def eval_lengths(self, dataset: Any) -> tuple[np.ndarray, np.ndarray]:
        """Each row's lengths as an evaluation batch's token budget counts them: its source's, `<s> y`'s."""
        return dataset.src_lengths, dataset.tgt_lengths + 1

    def static_batches(
        self, src: np.ndarray, tgt: np.ndarray, static: StaticShapesSpec, batching: Batching, tokenizer: Tokenizer
    ) -> StaticBatches:
        """The training sampler, its buckets' shapes and the collator under static shapes (buckets.py):
        `src`, `tgt` the lengths of the source and of `<s> y`, each side padded to its bucket's width."""
        widths = np.maximum(src, tgt)
        buckets = bucket_widths(
            widths, num_buckets=static.num_buckets, boundaries=static.bucket_boundaries, multiple=batching.multiple
        )
        sampler = batching.sampler(src, tgt, buckets)
        shapes = bucket_shapes(sampler.batches, src, tgt, buckets, batching.max_tokens, packed=static.packed)
        return sampler, shapes, StaticCollator(shapes, pad_id=Tokenizer.pad_id, bos_id=Tokenizer.bos_id, eos_id=Tokenizer.eos_id)

    def on_target(self) -> Reading:
        """This reading with a loss that counts the target's tokens alone (the perplexity `aiayn evaluate` reports)."""
        return self

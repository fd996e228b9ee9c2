"""What the encoder-only graph's model reads (builder/data/reading.py's protocol): one language's
text, each sentence a row `<s> x </s>`, some of its tokens masked for the model to predict
(Devlin et al. 2019's masked language model).

Each sentence token (not `<s>` or `</s>`) is predicted with probability `probability` (BERT's
0.15), and at least one a sentence; a predicted token is replaced by `<mask>` with probability
`replace` (0.8), by a token drawn uniformly from the vocabulary's non-special tokens with
probability `random` (0.1), and kept otherwise. The draws come from a generator seeded with the
run's seed and the batch's sentence ids: a batch is masked the same way wherever it is drawn
(a resumed run masks its batches bit for bit as the run it resumes; a validation batch alike at
every validation), and a sentence is masked anew each time the shuffle puts it in another batch
(RoBERTa's dynamic masking, Liu et al. 2019)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from aiayn.builder.data.collate import Batch, padded
from aiayn.builder.data.dataset import Example
from aiayn.builder.data.ragged import RaggedIds
from aiayn.builder.data.reading import Batching, Reading, SplitPaths, StaticBatches
from aiayn.builder.data.tokenizer import MASK, Tokenizer
from aiayn.builder.errors import UserError
from aiayn.builder.graphs.readings import sentences
from aiayn.schemas.data import StaticShapesSpec


@dataclass(frozen=True)
class Masking:
    """How a sentence's tokens are masked (see the module's text)."""

    probability: float = 0.15
    replace: float = 0.8
    random: float = 0.1
    seed: int = 0


class MaskingCollator:
    """Examples -> a Batch whose `src` is the masked rows `<s> x </s>` (right-padded), `tgt_out` the
    original token at each predicted position (padding elsewhere), `tgt_rows` the flat indices of the
    predicted positions; `tgt_in` is `src` (the loss reads src's own positions)."""

    def __init__(self, masking: Masking, *, mask_id: int, vocab_size: int, first_token: int, multiple: int = 1) -> None:
        self.masking, self.mask_id, self.vocab_size, self.first_token = masking, mask_id, vocab_size, first_token
        self.multiple = multiple

    def __call__(self, examples: Sequence[Example]) -> Batch:
        rows = [np.concatenate([[Tokenizer.bos_id], e.tgt, [Tokenizer.eos_id]]).astype(np.int64) for e in examples]
        rng = np.random.default_rng([self.masking.seed, *(e.id for e in examples)])
        src = padded(rows, Tokenizer.pad_id, before=None, after=None, multiple=self.multiple)
        labels = torch.full_like(src, Tokenizer.pad_id)
        for b, row in enumerate(rows):
            chosen = self.predicted(rng, len(row) - 2) + 1  # positions after <s>, before </s>
            masked = self.replaced(rng, row[chosen])
            labels[b, chosen] = torch.from_numpy(row[chosen])
            src[b, chosen] = torch.from_numpy(masked)
        flat = labels.flatten().ne(Tokenizer.pad_id).nonzero().flatten()
        return Batch(
            src=src,
            tgt_in=src,
            tgt_out=labels,
            ids=torch.tensor([e.id for e in examples], dtype=torch.long),
            n_src_tokens=sum(len(r) for r in rows),
            n_tgt_tokens=int(flat.numel()),
            tgt_rows=flat,
            src_rows=None,
        )

    def predicted(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """The positions (of 0 .. n - 1) predicted: each with the probability, at least one where n > 0."""
        chosen = np.flatnonzero(rng.random(n) < self.masking.probability)
        if n and not len(chosen):
            chosen = rng.integers(0, n, size=1)
        return chosen

    def replaced(self, rng: np.random.Generator, tokens: np.ndarray) -> np.ndarray:
        """What each predicted token reads as: <mask>, a random non-special token, or itself."""
        u = rng.random(len(tokens))
        drawn = rng.integers(self.first_token, self.vocab_size, size=len(tokens))
        m = self.masking
        return np.where(u < m.replace, self.mask_id, np.where(u < m.replace + m.random, drawn, tokens))


class MaskedTextReading(Reading):
    """One language's text (`side`): its file is both sides of each split, each sentence one row."""

    specials = (MASK,)

    def __init__(self, side: str, masking: Masking) -> None:
        self.side, self.masking = side, masking

    def __repr__(self) -> str:
        return f"MaskedTextReading(side={self.side!r}, {self.masking!r})"

    def files(self, paths: SplitPaths) -> SplitPaths:
        text = next(p for p in paths if p.suffix == f".{self.side}")  # {split}.{side}
        return text, text

    def check_tokenizer(self, tokenizer: Tokenizer) -> None:
        if mask_id(tokenizer) is None:
            raise UserError(
                f"data: a masked language model reads {MASK} where a token is masked, and the tokenizer has no {MASK}; "
                f"train one here (aiayn's tokenizers add it), or give data.tokenizer a file whose vocabulary has {MASK}"
            )

    def dataset(self, data: Any, split: str, src: RaggedIds, tgt: RaggedIds) -> Any:
        """Evaluation: every sentence with a token; training: those max_len and min_len keep."""
        return sentences(data, split, tgt)

    def collate(self, tokenizer: Tokenizer, pad_to_multiple: int) -> Callable[..., Any]:
        self.check_tokenizer(tokenizer)
        found = mask_id(tokenizer)
        assert found is not None
        first = 1 + max(found, *(i for i in (tokenizer.sep_id,) if i is not None), Tokenizer.unk_id)
        return MaskingCollator(
            self.masking, mask_id=found, vocab_size=tokenizer.vocab_size, first_token=first, multiple=pad_to_multiple
        )

    def eval_lengths(self, dataset: Any) -> tuple[np.ndarray, np.ndarray]:
        return dataset.tgt_lengths * 0, dataset.tgt_lengths + 2  # `<s> x </s>`, one row

    def static_batches(
        self, src: np.ndarray, tgt: np.ndarray, static: StaticShapesSpec, batching: Batching, tokenizer: Tokenizer
    ) -> StaticBatches:
        raise UserError("data.static_shapes: not yet for an encoder-only model (its rows are masked as they are collated)")


def mask_id(tokenizer: Tokenizer) -> int | None:
    """The id of <mask>, where the vocabulary has it."""
    tokens = tokenizer.tokens()
    return tokens.index(MASK) if MASK in tokens else None

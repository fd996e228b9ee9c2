"""A trained encoder-only masked language model in Python: `aiayn.load_run(run)` of such a run gives
one. `fill_mask` gives the most probable tokens where a line says `<mask>` (transformers'
fill-mask pipeline), `scores` the masked-LM loss, PPL and accuracy of lines masked as training
masks them (what `aiayn evaluate` reports of it)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from aiayn.builder.data.dataset import TranslationDataset
from aiayn.builder.data.loaders import eval_loader, loader_options
from aiayn.builder.data.ragged import RaggedIds
from aiayn.builder.data.tokenizer import MASK, Tokenizer
from aiayn.builder.decode.inference import TextInference
from aiayn.builder.decode.metrics import masked_lm_scores
from aiayn.builder.errors import UserError, described, strings_argument
from aiayn.builder.graph import graph_of
from aiayn.schemas.experiment import ExperimentSpec


class Fill(NamedTuple):
    """One candidate for a `<mask>`.

    :param token: the token, as the tokenizer writes it ("▁two")
    :param text: the token as text ("two")
    :param probability: its probability at the mask"""

    token: str
    text: str
    probability: float


class MaskedLanguageModel(TextInference):
    """An encoder-only model of one language's text with its tokenizer and its run's settings.

    :param model: the encoder-only model, in eval mode
    :param spec: the run's ExperimentSpec
    :param tokenizer: its tokenizer (with `<mask>`)
    :param checkpoint: the file the weights came from
    :param what: which model that is: "step 300", "the mean of ..." """

    task = "masked_lm"
    kind = "a masked language model"
    endpoints = ()
    verbs = frozenset({"evaluate"})
    spec: ExperimentSpec

    def __init__(self, model: Any, spec: ExperimentSpec, tokenizer: Tokenizer, checkpoint: Path, what: str) -> None:
        super().__init__(model, spec, tokenizer, checkpoint, what)
        self.reading = graph_of(spec).reading(spec)
        self.reading.check_tokenizer(tokenizer)
        self.mask_id = tokenizer.tokens().index(MASK)

    def refusal(self, verb: str, path: Path | str) -> str:
        return (
            f"{path} is a masked language model, which aiayn {verb} does not take: aiayn evaluate scores it, and in "
            f"Python aiayn.load_run(run).fill_mask(lines) fills in its {MASK}s"
        )

    def __repr__(self) -> str:
        params = sum(p.numel() for p in self.model.parameters())
        return f"MaskedLanguageModel({str(self.checkpoint)!r}, {self.what}, {params:,} parameters)"

    @torch.no_grad()
    def fill_mask(self, lines: Sequence[str] | str, *, top_k: int = 5) -> list[list[list[Fill]]]:
        """The `top_k` most probable tokens at each `<mask>` of each line, most probable first.

        :param lines: the texts (a str: that one), each with one `<mask>` or more where a token is left out
        :param top_k: how many candidates a mask
        :returns: a list a line, of a list a mask, of its candidates
        :raises UserError: a line without `<mask>`, or longer than the model's positions"""
        lines = strings_argument(lines, "lines", one=True)
        if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
            raise UserError(f"top_k: expected a whole number >= 1, got {described(top_k)}")
        rows = [self._row(i, line) for i, line in enumerate(lines)]
        width = max(len(r) for r in rows)
        src = torch.full((len(rows), width), Tokenizer.pad_id, dtype=torch.long)
        for b, row in enumerate(rows):
            src[b, : len(row)] = torch.tensor(row)
        self.model.eval()
        device = next(self.model.parameters()).device
        logits = self.model(src.to(device)).float()  # (B, S, V)
        logits[..., [Tokenizer.pad_id, self.mask_id]] = -float("inf")  # never padding, never <mask> itself
        probs = logits.softmax(-1).cpu()
        k = min(top_k, probs.size(-1))
        found = []
        for b, row in enumerate(rows):
            masks = [j for j, t in enumerate(row) if t == self.mask_id]
            best = [probs[b, j].topk(k) for j in masks]
            found.append([[self._fill(int(i), float(p)) for p, i in zip(top.values, top.indices)] for top in best])
        return found

    def _row(self, i: int, line: str) -> list[int]:
        pieces = line.split(MASK)
        if len(pieces) < 2:
            raise UserError(f"line {i + 1} has no {MASK}: write {MASK} where a token is to be filled in")
        ids = [Tokenizer.bos_id]
        for j, piece in enumerate(pieces):
            ids += ([self.mask_id] if j else []) + (self.tokenizer.encode(piece.strip()) if piece.strip() else [])
        ids.append(Tokenizer.eos_id)
        positions = self.spec.model.positional.max_positions
        if positions is not None and len(ids) > positions:
            raise UserError(
                f"line {i + 1} has {len(ids) - 2} tokens, and with <s> and </s> more than the model's {positions} positions"
            )
        return ids

    def _fill(self, token_id: int, probability: float) -> Fill:
        return Fill(self.tokenizer.id_to_token(token_id), self.tokenizer.decode([token_id]), probability)

    def text_scores(self, lines: Sequence[str], max_tokens: int) -> dict[str, Any]:
        """`scores` of `lines`, as `aiayn evaluate` reports them.

        :param lines: the sentences, blank ones skipped
        :param max_tokens: padded tokens a batch"""
        return self.scores(lines, max_tokens=max_tokens)

    def text_report(self, data: str, metrics: dict[str, Any]) -> list[str]:
        """The numbers of `text_scores` as `aiayn evaluate` prints them.

        :param data: the text scored, in words
        :param metrics: what text_scores gave"""
        return [
            f"data        {data} ({metrics['n_sentences']} sentences, {metrics['mlm_tokens']} tokens masked, as training masks them)",
            f"PPL         {metrics['ppl']:6.2f}  per masked token, no label smoothing",
            f"accuracy    {100 * metrics['mlm_accuracy']:6.2f}% of the masked tokens the most probable",
        ]

    def scores(self, lines: Sequence[str], *, max_tokens: int | None = None) -> dict[str, Any]:
        """The masked-LM loss, PPL and accuracy (mlm_accuracy) of `lines`, each one sentence, masked as the
        run's training masks them (its seed: the same lines, the same masks); blank lines are skipped.

        :param lines: the sentences
        :param max_tokens: padded tokens a batch (default: the run's decode.max_tokens)
        :returns: loss, ppl, mlm_accuracy, mlm_tokens, n_sentences"""
        ids = RaggedIds.from_lists(self.tokenizer.encode_batch(list(lines)))
        dataset = TranslationDataset(ids, ids, np.flatnonzero(ids.lengths > 0), source=False)
        options = {**loader_options(0, False), "collate_fn": self.reading.collate(self.tokenizer, 1)}
        limit = max_tokens or self.spec.decode.max_tokens
        batches = eval_loader(dataset, limit, lengths=self.reading.eval_lengths(dataset), **options)
        return masked_lm_scores(self.model, batches)

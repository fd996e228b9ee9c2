"""Several models decoding as one: each step's next-token distribution is the mean of theirs.

An ensemble's probability of the next token is the average of its members' (fairseq's
EnsembleModel: the log of the mean of the probabilities, not the mean of the log-probabilities),
so a search, forced scoring and an n-best list treat it as one model whose log P(y_t | y_<t, X)
is log(1/M sum_m P_m(y_t | y_<t, X)). It answers every call the searches make of a model (encode,
decode with a DecoderState, the teacher-forced pass, its ids, its output room); the members must
read and write the same token ids, which `load_ensemble` checks of their tokenizers.

The memory a search carries (and reorders row by row) is the members' encoder outputs side by
side in its last dimension; `decode` gives each member its own part. One DecoderState serves
every member (its caches are keyed by module); the position it counts advances once a step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from aiayn.blocks import DecoderState, TransformerGraph, TransformerModel


class Ensemble(TransformerModel):
    """`members` (two or more single models, of one graph, with one pad id and the same source ends) as one model."""

    def __init__(self, members: Sequence[TransformerModel]) -> None:
        super().__init__()
        if len(members) < 2:
            raise ValueError(f"an ensemble needs two or more models, got {len(members)}")
        models = [graph for graph in (m.graph() for m in members) if graph is not None]
        if len(models) < len(members):
            raise ValueError("the members of an ensemble are single models, not ensembles: give their members instead")
        first = models[0]
        for name, value in (("pad_id", _pad), ("source_eos_id", _eos), ("source_bos_id", _bos), ("vocab_size", _vocab)):
            values = {value(m) for m in models}
            if len(values) > 1:
                raise ValueError(
                    f"the members of an ensemble read their inputs alike: their {name} differ ({sorted(map(str, values))})"
                )
        if len({m.prefix_source for m in models}) > 1:
            raise ValueError("the members of an ensemble read their inputs alike: some read the source as a prefix, some not")
        if len({type(m) for m in models}) > 1:
            raise ValueError("the members of an ensemble are of one graph: encoder-decoder models, or decoder-only models")
        unique: list[TransformerGraph] = []
        for m in models:  # a model given twice counts twice, but runs once (a DecoderState keys its caches by module)
            if not any(m is u for u in unique):
                unique.append(m)
        self.members = nn.ModuleList(unique)  # registers their parameters (device moves, eval mode)
        self.models = unique  # the same, typed: each member once
        self.counts = [sum(m is u for m in models) for u in unique]
        self.pad_id, self.source_eos_id, self.source_bos_id = first.pad_id, first.source_eos_id, first.source_bos_id
        self.equal_length_prompts = first.equal_length_prompts
        self.cross_attention, self.prefix_source = first.cross_attention, first.prefix_source
        self._shapes: list[torch.Size] = []  # each member's memory past (B, S), as the last encode made them

    def encode(self, src: Tensor, rows: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """src (B, S) -> every member's memory side by side (B, S, their widths summed) and the padding (B, S).
        A member's memory is whatever its graph's encode makes (an encoder's output, or the prompt itself),
        each flattened past (B, S) to its width, and given back to it as it was (`_memories`)."""
        memories = [m.encode(src)[0] for m in self.models]
        self._shapes = [memory.shape[2:] for memory in memories]
        return torch.cat([memory.reshape(*memory.shape[:2], -1) for memory in memories], dim=-1), src.eq(self.pad_id)

    def _memories(self, memory: Tensor) -> list[Tensor]:
        parts = memory.split([math.prod(shape) for shape in self._shapes], dim=-1)
        return [part.reshape(*part.shape[:2], *shape) for part, shape in zip(parts, self._shapes)]

    def decode(
        self, tgt: Tensor, memory: Tensor, memory_padding_mask: Tensor | None, state: DecoderState | None = None
    ) -> Tensor:
        """log of the members' mean next-token probability (B, T, V), as logits a log-softmax leaves as they are."""
        start = None if state is None else state.length
        log_probs = []
        for member, part in zip(self.models, self._memories(memory)):
            if state is not None and start is not None:
                state.length = start  # each member reads the positions from where the step began
            logits = member.decode(tgt, part, memory_padding_mask, state)
            log_probs.append(logits.to(torch.promote_types(logits.dtype, torch.float32)).log_softmax(dim=-1))
        return mean_of_probabilities(log_probs, self.counts)

    def forward(self, src: Tensor, tgt_in: Tensor, **kwargs: Any) -> Tensor:
        """Teacher forcing: the log of the members' mean probabilities (B, T, V) (`kwargs`: what
        each member's forward takes besides, a decoder-only translation's `prefix`)."""
        log_probs = [
            m(src, tgt_in, **kwargs).to(torch.promote_types(m.generator.weight.dtype, torch.float32)).log_softmax(dim=-1)
            for m in self.models
        ]
        return mean_of_probabilities(log_probs, self.counts)

    def output_room(self, src: Tensor) -> int | Tensor | None:
        """The least room any member's learned positions leave (None: none of them ends)."""
        rooms = [r for r in (m.output_room(src) for m in self.models) if r is not None]
        return min(rooms) if rooms else None

    @property
    def source_extra(self) -> int:
        return self.models[0].source_extra  # the members read sources alike (checked)

    def source_positions(self) -> int | None:
        """The fewest source positions of any member (None: none of them ends)."""
        return _least(m.source_positions() for m in self.models)

    def target_positions(self) -> int | None:
        """The fewest output positions of any member (None: none of them ends)."""
        return _least(m.target_positions() for m in self.models)

    def first_output_id(self, bos_id: int, sep_id: int | None) -> int | None:
        return self.models[0].first_output_id(bos_id, sep_id)

    def __len__(self) -> int:
        return sum(self.counts)


def mean_of_probabilities(log_probs: Sequence[Tensor], counts: Sequence[int] | None = None) -> Tensor:
    """log(1/M sum_m exp(log_probs[m])), elementwise; `counts`: how many times each stands in the M."""
    counts = [1] * len(log_probs) if counts is None else list(counts)
    weights = torch.tensor([math.log(c) for c in counts], dtype=log_probs[0].dtype, device=log_probs[0].device)
    stacked = torch.stack(list(log_probs)) + weights.view(-1, *([1] * log_probs[0].dim()))
    return torch.logsumexp(stacked, dim=0) - math.log(sum(counts))


def _pad(model: TransformerGraph) -> int | None:
    return model.pad_id


def _eos(model: TransformerGraph) -> int | None:
    return model.source_eos_id


def _bos(model: TransformerGraph) -> int | None:
    return model.source_bos_id


def _vocab(model: TransformerGraph) -> int | None:
    return int(model.generator.vocab_size)


def _least(values: Any) -> int | None:
    found = [v for v in values if v is not None]
    return min(found) if found else None

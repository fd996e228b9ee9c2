"""The decoder stack alone: a language model, or translation read as one sequence (GPT's graph;
fairseq's transformer_lm; Raffel et al. 2020's prefix LM)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from aiayn.blocks.context import LayerContext, PackedRows
from aiayn.blocks.embedding import OutputProjection
from aiayn.blocks.input import InputEmbedding
from aiayn.blocks.model import TransformerGraph
from aiayn.blocks.stack import TransformerStack
from aiayn.blocks.state import DecoderState


class DecoderOnly(TransformerGraph):
    """Embedding, a stack of causal self-attending layers, logits: the stack, layers and blocks of
    the encoder-decoder's decoder, handed no memory.

    One sequence a row. A translation is read as `<s> x <sep> y`: `forward(src, tgt_in)` takes
    the prompt `src` (B, S) = `<s> x`, the same length in every row (no padding), and `tgt_in`
    (B, T) = `<sep> y`, right-padded, and returns the logits at tgt_in's positions, so that the
    search and forced decoding call it as they call an EncoderDecoder (`encode` hands the prompt
    on as the "memory"; `decode` with a DecoderState caches the prompt's keys and values on its
    first call). A language model's batch has no prompt (S = 0). `prefix`: where the source is
    read bidirectionally (model.source_mask: prefix), the prompt and the first token of tgt_in
    (`<s> x <sep>`) are a prefix every query reads; a training batch gives each row's own (B,).
    """

    def __init__(
        self,
        *,
        embed: InputEmbedding,
        decoder: TransformerStack,
        generator: OutputProjection,
        pad_id: int,
        bos_id: int | None = None,
        prefix_source: bool = False,
    ) -> None:
        super().__init__()
        if pad_id < 0:
            raise ValueError(f"pad_id ({pad_id}) must be a token id >= 0")
        self.tgt_embed, self.decoder, self.generator = embed, decoder, generator
        self.pad_id = pad_id
        self.source_bos_id = bos_id  # the token every sequence starts with, before its source
        self.source_eos_id: int | None = None  # read by the searches: a decoder-only source ends with nothing
        self.prefix_source = prefix_source  # a bidirectional prefix (model.source_mask: prefix)

    equal_length_prompts = True  # batches whose prompts have one length: a padded prompt would leave holes
    cross_attention = False  # no layer attends a memory: no alignments to read

    def forward(
        self,
        src: Tensor,
        tgt_in: Tensor,
        rows: Tensor | None = None,
        src_rows: Tensor | None = None,
        project: bool = True,
        prefix: Tensor | None = None,
    ) -> Tensor:
        """src (B, S) a prompt without padding (S may be 0), tgt_in (B, T) -> logits (B, T, V) at
        tgt_in's positions (project=False: the stack's output). `rows` (n,): flat indices into
        B * T of tgt_in's non-padding tokens (a prompt-less batch only): then (n, V)."""
        return self.decode(tgt_in, src, None, rows=rows, project=project, prefix=prefix)

    def encode(self, src: Tensor, rows: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The prompt is the memory the decode calls read: src itself, and its padding (B, S)."""
        return src, src.eq(self.pad_id)

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        memory_padding_mask: Tensor | None,
        state: DecoderState | None = None,
        rows: Tensor | None = None,
        memory_rows: PackedRows | None = None,
        project: bool = True,
        prefix: Tensor | None = None,
    ) -> Tensor:
        """Logits (B, T, V) of `tgt` after the prompt `memory` (B, S). With `state`, tgt holds only
        the new tokens; the first call (state.length 0) runs the prompt too and caches it."""
        B, S = memory.shape
        first = state is None or state.length == 0
        if S and first and bool(memory.eq(self.pad_id).any()):
            raise ValueError("a decoder-only model reads one sequence a row: give prompts of one length, without padding")
        x = torch.cat([memory, tgt], dim=1) if S and first else tgt  # (B, S + T) or (B, T)
        offset = 0 if state is None else state.length
        if prefix is None and self.prefix_source and S and first:
            prefix = torch.full((B,), S + 1, dtype=torch.long, device=x.device)  # <s> x and <sep>
        if rows is not None and (S or state is not None):
            raise ValueError("rows select the tokens of a prompt-less, teacher-forced batch: give src with 0 columns")
        y = self.decoder(self.tgt_embed(x, offset), LayerContext(state=state, prefix=prefix))  # (B, L, d_model)
        if state is not None:
            state.advance(x.size(1))
        if rows is not None:  # the positions the loss reads: a translation's target, not its source
            y = y.flatten(0, 1).index_select(0, rows)  # (n, d_model)
        elif x.size(1) != tgt.size(1):
            y = y[:, -tgt.size(1) :]  # (B, T, d_model): tgt's positions
        return self.generator(y) if project else y

    def output_room(self, src: Tensor) -> int | Tensor | None:
        """How many tokens an output after the prompt src (B, S) may have: the positions a learned
        table has left (None: sinusoids and rotary never end)."""
        positions = self.target_positions()
        return None if positions is None else positions - src.size(1)

    @property
    def source_extra(self) -> int:
        return 2  # <s> before the source, <sep> after it, in the one table

    def stacks(self) -> dict[str, TransformerStack]:
        return {"decoder": self.decoder}

    def source_positions(self) -> int | None:
        return self.target_positions()  # one sequence, one table

    def target_positions(self) -> int | None:
        return getattr(self.tgt_embed.positional, "max_len", None)

    def first_output_id(self, bos_id: int, sep_id: int | None) -> int | None:
        return sep_id  # the output follows `<s> x <sep>`

    def decoder_queries(self, source: list[Any], output: list[Any]) -> list[Any]:
        return [*source, *output]  # `<s> x <sep> y` is one sequence

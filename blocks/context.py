"""What a sub-layer may read besides its input: padding masks, encoder memory, decoding cache,
packed rows, and the score bias its stack shares."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from torch import Tensor, nn

if TYPE_CHECKING:
    from aiayn.blocks.state import DecoderState


class PackedRows(NamedTuple):
    """x holds only some rows of a (batch, length) sequence: `rows` (n,), flat indices into
    batch * length, in each sequence a prefix of it (e.g. the non-padding tokens of right-padded
    sequences). Position-wise sub-layers never see the rest; attention unpacks its projections,
    and masks the rows left out as keys (causally, or by the padding mask).

    :param rows: (n,) flat indices into batch * length, in each sequence a prefix of it
    :param batch: the sequences
    :param length: the positions of each"""

    rows: Tensor
    batch: int
    length: int

    def pack(self, full: Tensor) -> Tensor:
        """(batch, length, ...) -> (n, ...)"""
        return full.flatten(0, 1).index_select(0, self.rows)

    def unpack(self, rows: Tensor) -> Tensor:
        """(n, ...) -> (batch, length, ...), zeros at the rows left out."""
        full = rows.new_zeros(self.batch * self.length, *rows.shape[1:])
        return full.index_copy(0, self.rows, rows).view(self.batch, self.length, *rows.shape[1:])


@dataclass
class LayerContext:
    """What every sub-layer may read besides its input x.

    :param self_padding_mask: (B, T) bool, True at padding of x
    :param memory: (B, S, d_model), the encoder's output, for cross-attention
    :param memory_padding_mask: (B, S) bool, True at padding of memory
    :param state: the incremental decoding cache (a DecoderState)
    :param packed: x is (n, d_model): these rows of a (B, T) sequence
    :param memory_packed: memory is (n, d_model): these rows of a (B, S) sequence
    :param position_bias: the stack's shared score bias, (T, S) -> (h or 1, T, S), added to its
        self-attentions' scores (T5's relative bias)
    :param prefix: (B,): row b's first prefix[b] positions are read by every query of a causal
        self-attention (a prefix LM's source); None: causal throughout"""

    self_padding_mask: Tensor | None = None  # (B, T) bool, True at padding of x
    memory: Tensor | None = None  # (B, S, d_model) encoder output, for cross-attention
    memory_padding_mask: Tensor | None = None  # (B, S) bool, True at padding of memory
    state: DecoderState | None = None  # incremental decoding cache
    packed: PackedRows | None = None  # x is (n, d_model): these rows of a (B, T) sequence
    memory_packed: PackedRows | None = None  # memory is (n, d_model): these rows of a (B, S) sequence
    # the stack's shared score bias: bias(T, S) -> (h or 1, T, S), added to the scores of its
    # self-attentions, whose queries are the last T of the S key positions (T5's relative bias)
    position_bias: nn.Module | None = None
    # (B,): the first prefix[b] positions of row b are read by every query of a causal self-attention
    # (a decoder-only model's source under model.source_mask: prefix); None: causal throughout
    prefix: Tensor | None = None

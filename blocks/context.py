"""What a sub-layer may read besides its input: padding masks, encoder memory, decoding cache."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from torch import Tensor

if TYPE_CHECKING:
    from aiayn.blocks.state import DecoderState


class PackedRows(NamedTuple):
    """x holds only some rows of a (batch, length) sequence: `positions` (n,), flat indices into
    batch * length, in each sequence a prefix of it (e.g. the non-padding tokens of right-padded
    sequences). Position-wise sub-layers never see the rest; attention unpacks its projections,
    and masks the rows left out as keys (causally, or by the padding mask)."""

    positions: Tensor
    batch: int
    length: int

    def pack(self, full: Tensor) -> Tensor:
        """(batch, length, ...) -> (n, ...)"""
        return full.flatten(0, 1).index_select(0, self.positions)

    def unpack(self, rows: Tensor) -> Tensor:
        """(n, ...) -> (batch, length, ...), zeros at the rows left out."""
        full = rows.new_zeros(self.batch * self.length, *rows.shape[1:])
        return full.index_copy(0, self.positions, rows).view(self.batch, self.length, *rows.shape[1:])


@dataclass
class LayerContext:
    """What every sub-layer may read besides its input x."""

    self_padding_mask: Tensor | None = None  # (B, T) bool, True at padding of x
    memory: Tensor | None = None  # (B, S, d_model) encoder output, for cross-attention
    memory_padding_mask: Tensor | None = None  # (B, S) bool, True at padding of memory
    state: DecoderState | None = None  # incremental decoding cache
    packed: PackedRows | None = None  # x is (n, d_model): these rows of a (B, T) sequence
    memory_packed: PackedRows | None = None  # memory is (n, d_model): these rows of a (B, S) sequence

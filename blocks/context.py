"""What a sub-layer may read besides its input: padding masks, encoder memory, decoding cache."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from torch import Tensor

if TYPE_CHECKING:
    from blocks.state import DecoderState


@dataclass
class LayerContext:
    """What every sub-layer may read besides its input x."""

    self_padding_mask: Tensor | None = None  # (B, T) bool, True at padding of x
    memory: Tensor | None = None  # (B, S, d_model) encoder output, for cross-attention
    memory_padding_mask: Tensor | None = None  # (B, S) bool, True at padding of memory
    state: DecoderState | None = None  # incremental decoding cache

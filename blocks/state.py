"""The cache that lets the decoder run one step at a time (incremental decoding)."""

from __future__ import annotations

from torch import Tensor, nn


class DecoderState:
    """Per-attention-module caches plus the number of target positions decoded so far.

    Each attention module owns one dict of tensors, keyed by the module itself, whose first
    dimension is the batch. Causal self-attention keeps the keys and values of every past
    position; cross-attention keeps the keys and values of the encoder memory, computed once.
    Beam search keeps the batch dimension of every cache in step with its hypotheses through
    `reorder`.
    """

    def __init__(self) -> None:
        self.length = 0  # target positions already decoded; the next token has this position
        self._caches: dict[nn.Module, dict[str, Tensor]] = {}

    def cache(self, module: nn.Module) -> dict[str, Tensor]:
        """The (mutable) cache of `module`, created empty on first use."""
        return self._caches.setdefault(module, {})

    def advance(self, steps: int) -> None:
        """Record that `steps` more target positions went through the decoder."""
        if steps < 0:
            raise ValueError(f"steps ({steps}) must be >= 0")
        self.length += steps

    def reorder(self, indices: Tensor) -> None:
        """Select rows `indices` (1-D long) of every cached tensor along the batch dimension.

        Row i of the new batch is row indices[i] of the old one: beam search uses it to follow
        the surviving hypotheses and to drop finished sentences.
        """
        if indices.dim() != 1:
            raise ValueError(f"indices must be 1-D, got shape {tuple(indices.shape)}")
        for cache in self._caches.values():
            for name, tensor in cache.items():
                cache[name] = tensor.index_select(0, indices.to(tensor.device))

    def __repr__(self) -> str:
        return f"DecoderState(length={self.length}, modules={len(self._caches)})"

"""The cache that lets the decoder run one step at a time (incremental decoding)."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class DecoderState:
    """Per-attention-module caches plus the number of target positions decoded so far.

    Each attention module owns one dict of tensors, keyed by the module itself, whose first
    dimension is the batch. Causal self-attention keeps the keys and values of every past
    position (`cache`); cross-attention keeps the keys and values of the encoder memory, computed
    once (`memory_cache`). Beam search keeps the batch dimension of every cache in step with its
    hypotheses through `reorder`.

    The contract for a caller (a search of one's own): make one with `model.init_state()`, then
    call `model.decode(new_tokens, memory, memory_padding_mask, state)` with only the tokens not
    yet decoded (usually one a row); `decode` advances `state.length` itself, by the number of
    tokens given, and its logits equal the full teacher-forced pass's at those positions. Drop or
    repeat rows (finished sentences, beams) with `reorder(rows)` before the next call; the
    encoder memory passed to `decode` must follow the same rows. `builder/decode/search.py` is
    the reference use.

    Reordering the caches of past positions is lazy: `reorder` records the rows to select, and
    they are selected when the cache is next used, by `cache`, or by its owner together with its
    next append (`append`): one copy per step instead of a select and a concatenation.
    """

    def __init__(self) -> None:
        self.length = 0  # target positions already decoded; the next token has this position
        self._caches: dict[nn.Module, dict[str, Tensor]] = {}
        self._memory_caches: dict[nn.Module, dict[str, Tensor]] = {}
        self._rows: dict[nn.Module, Tensor] = {}  # pending row selection of each cache

    def cache(self, module: nn.Module) -> dict[str, Tensor]:
        """The (mutable) cache of `module`, created empty on first use, its rows up to date."""
        cache, rows = self.take_cache(module)
        if rows is not None:
            for name, tensor in cache.items():
                cache[name] = tensor.index_select(0, rows.to(tensor.device))
        return cache

    def take_cache(self, module: nn.Module) -> tuple[dict[str, Tensor], Tensor | None]:
        """The cache of `module` and the rows (1-D long, or None) it still has to select: the
        caller selects them, e.g. while copying the cache to append to it."""
        return self._caches.setdefault(module, {}), self._rows.pop(module, None)

    def append(self, module: nn.Module, k: Tensor, v: Tensor, key_padding: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None]:
        """`module`'s keys and values (B, heads, S, d) of every position so far: the cached ones,
        their pending rows selected, then this step's k and v (and the keys' padding (B, S), where
        any step had some), in one copy; the cache keeps them for the next step."""
        cache, rows = self.take_cache(module)
        B, T = k.size(0), k.size(2)
        if key_padding is not None or "padding" in cache:
            past_B, past = (cache["k"].size(0), cache["k"].size(2)) if "k" in cache else (B, 0)
            old = cache.get("padding", k.new_zeros(past_B, past, dtype=torch.bool))
            new = key_padding if key_padding is not None else k.new_zeros(B, T, dtype=torch.bool)
            key_padding = cache["padding"] = _select_cat(old, rows, new)  # (B, S)
        if "k" in cache:
            k, v = _select_cat(cache["k"], rows, k), _select_cat(cache["v"], rows, v)
        cache["k"], cache["v"] = k, v
        return k, v, key_padding

    def memory_cache(self, module: nn.Module) -> dict[str, Tensor]:
        """The cache of what `module` computes from the encoder memory: one row per memory row."""
        return self._memory_caches.setdefault(module, {})

    def advance(self, steps: int) -> None:
        """Record that `steps` more target positions went through the decoder."""
        if steps < 0:
            raise ValueError(f"steps ({steps}) must be >= 0")
        self.length += steps

    def reorder(self, indices: Tensor, *, memory: bool = True) -> None:
        """Select rows `indices` (1-D long) of every cached tensor along the batch dimension.

        Row i of the new batch is row indices[i] of the old one: beam search uses it to follow
        the surviving hypotheses and to drop finished sentences. memory=False leaves the memory
        caches as they are: right when the memory rows stay (beam search moving hypotheses among
        the beams of one sentence, which share its memory); `reorder_memory` selects them alone.
        """
        _check_indices(indices)
        for module, cache in self._caches.items():
            if cache:
                rows = self._rows.get(module)
                self._rows[module] = indices if rows is None else rows[indices.to(rows.device)]
        if memory:
            self.reorder_memory(indices)

    def reorder_memory(self, indices: Tensor) -> None:
        """Select rows `indices` of the memory caches only (the memory itself was selected so)."""
        _check_indices(indices)
        for cache in self._memory_caches.values():
            for name, tensor in cache.items():
                cache[name] = tensor.index_select(0, indices.to(tensor.device))

    def __repr__(self) -> str:
        return f"DecoderState(length={self.length}, modules={len(self._caches) + len(self._memory_caches)})"


def _check_indices(indices: Tensor) -> None:
    if indices.dim() != 1:
        raise ValueError(f"indices must be 1-D, got shape {tuple(indices.shape)}")


def _select_cat(old: Tensor, rows: Tensor | None, new: Tensor) -> Tensor:
    """cat([old[rows], new], dim=-2 for 4-D, -1 for 2-D) in one copy of `old`."""
    dim = 2 if old.dim() == 4 else 1
    if rows is None:
        return torch.cat([old, new], dim=dim)
    if torch.is_grad_enabled() and (old.requires_grad or new.requires_grad):  # out= has no autograd
        return torch.cat([old.index_select(0, rows.to(old.device)), new], dim=dim)
    shape = list(new.shape)
    shape[dim] += old.size(dim)
    out = new.new_empty(shape)
    torch.index_select(old, 0, rows.to(old.device), out=out.narrow(dim, 0, old.size(dim)))
    out.narrow(dim, old.size(dim), new.size(dim)).copy_(new)
    return out

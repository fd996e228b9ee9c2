"""A stack of N layers (Sec 3.1: N = 6 for encoder and decoder)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from aiayn.blocks.context import LayerContext


class TransformerStack(nn.Module):
    """Applies `layers` in order, then `final_norm` if given (Sec 3.1).

    The paper's post-norm stacks have no final norm; pre-norm stacks need one, because their
    residual stream is otherwise never normalised. `position_bias`, a module the stack owns once,
    is handed to every layer through the context (`ctx.position_bias`), as T5 shares one relative
    position bias among the layers of a stack.

    `checkpointing` (set by the builder: train.activation_checkpointing): in training, each layer's
    activations are recomputed in backward instead of kept (torch.utils.checkpoint, non-reentrant,
    the RNG state kept so that dropout draws the same masks): the same gradients, less memory.
    """

    def __init__(
        self, *, layers: Sequence[nn.Module], final_norm: nn.Module | None = None, position_bias: nn.Module | None = None
    ) -> None:
        super().__init__()
        if len(layers) == 0:
            raise ValueError("layers is empty: a stack needs at least one layer (N >= 1)")
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm
        self.position_bias = position_bias
        self.checkpointing = False

    def forward(self, x: Tensor, ctx: LayerContext) -> Tensor:
        if self.position_bias is not None:
            ctx = dataclasses.replace(ctx, position_bias=self.position_bias)
        recompute = self.checkpointing and self.training and torch.is_grad_enabled()
        for layer in self.layers:
            x = checkpoint(layer, x, ctx, use_reentrant=False) if recompute else layer(x, ctx)  # (B, T, d_model)
        return x if self.final_norm is None else self.final_norm(x)

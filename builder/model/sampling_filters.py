"""aiayn's registered sampling filters (the `sampling_filter` slot; schemas/sampling_filter.py):
each a function logits (n, V) -> logits, -inf where a token is removed, after Sampling's own
temperature, top-k, top-p and epsilon (builder/decode/sampling.py)."""

from collections.abc import Callable
from typing import Any

import torch

from aiayn.schemas.sampling_filter import TypicalSpec


def typical(spec: TypicalSpec) -> Callable[[torch.Tensor], torch.Tensor]:
    """Locally typical sampling: keep the tokens nearest the entropy in information until their mass reaches spec.mass."""

    def apply(logits: torch.Tensor) -> torch.Tensor:
        logp = logits.log_softmax(-1)  # (n, V)
        p = logp.exp()
        entropy = -(p * logp).nan_to_num(nan=0.0).sum(-1, keepdim=True)  # (n, 1); a removed token's 0 x -inf counts 0
        order = (-logp - entropy).abs().argsort(dim=-1, stable=True)  # the most typical first
        ranked = p.gather(-1, order)  # (n, V)
        kept = (ranked.cumsum(-1) - ranked) < spec.mass  # while the mass before a token is under `mass`: the first stays
        return logits.masked_fill(~torch.zeros_like(kept).scatter(-1, order, kept), float("-inf"))

    return apply


def register_sampling_filters(add: Callable[..., Any]) -> None:
    """aiayn's sampling filters, through `add` (a RegistryBuilder's)."""
    add(TypicalSpec, slot="sampling_filter", build=typical)

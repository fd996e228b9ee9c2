"""A sampling filter from outside aiayn: min-p sampling (Nguyen et al. 2024, "Turning Up the Heat:
Min-p Sampling for Creative and Coherent LLM Outputs"): keep the tokens whose probability is at
least `min_p` times the most probable token's. The whole plugin is this spec, this function and
one registration; `aiayn translate --sampling --filter '{type: min_p, min_p: 0.1}'`, `aiayn
generate --filter ...`, `filters=[{"type": "min_p", "min_p": 0.1}]` in the Python API and in a
request to `aiayn serve` then draw with it."""

from typing import Literal

import torch
from pydantic import Field

import aiayn


class MinPSpec(aiayn.SamplingFilterSpec):
    """`{type: min_p, min_p: P}`: a token stays where its probability >= P x the highest."""

    type: Literal["min_p"] = "min_p"
    min_p: float = Field(default=0.05, ge=0.0, le=1.0)


def min_p_filter(spec: MinPSpec):
    """logits (n, V) -> the same, -inf where a token's probability is under min_p x the row's highest."""

    def apply(logits: torch.Tensor) -> torch.Tensor:
        probs = logits.softmax(-1)  # (n, V)
        floor = spec.min_p * probs.max(dim=-1, keepdim=True).values  # (n, 1)
        return logits.masked_fill(probs < floor, float("-inf"))  # the most probable token is never under its floor

    return apply


def register(registry: aiayn.RegistryBuilder) -> None:
    registry.add(MinPSpec, slot="sampling_filter", build=min_p_filter)

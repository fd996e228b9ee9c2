"""An aiayn plugin: `type: scaled_attention`, multi-head self-attention whose heads' outputs are
each multiplied by a learned scale (initialised to 1, so it starts as the paper's attention)
before W^O. It uses only the public `aiayn` API, and enters aiayn through the entry point of
group `aiayn.blocks` in its pyproject.toml."""

from typing import Literal

import torch
from torch import nn

import aiayn


class ScaledAttentionSpec(aiayn.SublayerSpec):
    type: Literal["scaled_attention"] = "scaled_attention"
    h: aiayn.PositiveInt
    d_k: aiayn.PositiveInt
    d_v: aiayn.PositiveInt
    causal: bool = False  # true: the decoder's masked self-attention

    @property
    def looks_ahead(self) -> bool:
        return not self.causal

    @property
    def table3(self) -> dict[str, int]:
        return {"h": self.h, "d_k": self.d_k, "d_v": self.d_v}


class ScaledAttention(aiayn.Sublayer):
    attention_maps = True

    def __init__(self, *, d_model: int, h: int, d_k: int, d_v: int, causal: bool) -> None:
        super().__init__()
        self.attention = aiayn.SelfAttention(d_model=d_model, h=h, d_k=d_k, d_v=d_v, mask=aiayn.CausalMask() if causal else None)
        self.scale = nn.Parameter(torch.ones(h))
        self.h, self.d_v = h, d_v
        # the heads' outputs reach W^O as its input: scaling its columns head by head scales the heads
        self.attention.w_o.register_forward_pre_hook(self._scale_heads)

    def _scale_heads(self, module: nn.Module, args: tuple[torch.Tensor]) -> tuple[torch.Tensor]:
        (heads,) = args  # (..., h * d_v)
        return (heads * self.scale.repeat_interleave(self.d_v),)

    def forward(self, x: torch.Tensor, ctx: aiayn.LayerContext) -> torch.Tensor:
        return self.attention(x, ctx)

    def attention_weights(self, x: torch.Tensor, ctx: aiayn.LayerContext) -> torch.Tensor:
        return self.attention.attention_weights(x, ctx)


def flops(spec: ScaledAttentionSpec, d_model: int, length: int) -> float:
    """The attention's (Sec. 3.2.2) and one multiply per head output."""
    keys = (length + 1) / 2 if spec.causal else length
    projections = 2 * (d_model * spec.h * (2 * spec.d_k + spec.d_v) + spec.h * spec.d_v * d_model)
    return projections + 2 * spec.h * (spec.d_k + spec.d_v) * keys + spec.h * spec.d_v


def register() -> None:
    aiayn.register(
        ScaledAttentionSpec,
        slot="sublayer",
        build=lambda spec, ctx: ScaledAttention(d_model=ctx.d_model, h=spec.h, d_k=spec.d_k, d_v=spec.d_v, causal=spec.causal),
        flops=flops,
        activations=lambda spec, d: spec.h * 2 * (spec.d_k + spec.d_v) + 4 * d,
    )

"""An aiayn plugin: `type: scaled_attention`, multi-head self-attention whose heads each multiply
their scores by a learned scale (a temperature per head, initialised to 1, so it starts as the
paper's attention). It is aiayn's own attention with one more part handed in: a q/k module that
scales each head's queries, after QK-norm and rotary where the YAML asks for them. It uses only the
public `aiayn` API, and enters aiayn through the entry point of group `aiayn.blocks` in its
pyproject.toml. relu_scores.py registers a score step the same way, in one small file, nfkc.py a text step, and
min_p.py a sampling filter."""

from typing import Literal

import torch
from torch import nn

import aiayn
from aiayn_example_plugin import min_p, nfkc, relu_scores


class ScaledAttentionSpec(aiayn.AttentionSpec):
    """h, d_k, d_v, kv_heads, rotary, qk_norm as every attention has them (AttentionSpec's);
    masked: true for the decoder's self-attention (each position reads the earlier ones)."""

    type: Literal["scaled_attention"] = "scaled_attention"
    masked: bool = False

    @property
    def causal(self) -> bool:
        return self.masked

    @property
    def looks_ahead(self) -> bool:
        return not self.masked

    @property
    def switches(self) -> dict:
        return {**super().switches, "head_scale": True}  # a column of its own in `aiayn results`


class HeadScale(nn.Module):
    """q (B, h, T, d_k) -> each head's queries times its learned scale; k as it is."""

    positional = False  # reads no positions

    def __init__(self, h: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(h))

    def forward(self, q: torch.Tensor, k: torch.Tensor, offset: int) -> tuple[torch.Tensor, torch.Tensor]:
        return q * self.scale.view(-1, 1, 1).to(q.dtype), k


def build(spec: ScaledAttentionSpec, ctx: aiayn.BuildContext) -> aiayn.SelfAttention:
    parts = aiayn.attention_parts(spec, ctx)  # sizes, the causal mask, QK-norm and rotary in order
    return aiayn.SelfAttention(**{**parts, "qk": [*parts["qk"], HeadScale(spec.h)]})


def register(registry: aiayn.RegistryBuilder) -> None:
    relu_scores.register(registry)  # a score step: `score: {type: relu}` on any attention
    nfkc.register(registry)  # a text step: `data.pipeline: [nfkc]`
    min_p.register(registry)  # a sampling filter: `--filter '{type: min_p, min_p: 0.1}'`
    registry.add(
        ScaledAttentionSpec,
        slot="sublayer",
        build=build,
        flops=lambda spec, d, length: (
            aiayn.attention_flops(spec, d, length) + spec.h * spec.d_k
        ),  # and a multiply per query value
        activations=lambda spec, d: aiayn.attention_activations(spec, d) + spec.h * spec.d_k,  # the scaled queries
    )

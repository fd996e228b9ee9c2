"""Multi-head attention sub-layers (Sec. 3.2.2): self, causal self, and cross to the encoder."""

from typing import Literal

from aiayn.schemas._base import PositiveInt, Probability, Spec


class _AttentionSpec(Spec):
    h: PositiveInt
    d_k: PositiveInt
    d_v: PositiveInt
    bias: bool = True
    attn_dropout: Probability = 0.0  # not in the paper; tensor2tensor and fairseq offer it

    @property
    def kind(self) -> str:
        return self.type.removesuffix("_attention")  # type: ignore[attr-defined]


class SelfAttentionSpec(_AttentionSpec):
    """Every position attends to every non-padding position of the same sequence."""

    type: Literal["self_attention"] = "self_attention"


class CausalSelfAttentionSpec(_AttentionSpec):
    """Position i attends to positions <= i only (the decoder's masked self-attention)."""

    type: Literal["causal_self_attention"] = "causal_self_attention"


class CrossAttentionSpec(_AttentionSpec):
    """Queries from the decoder, keys and values from the encoder output."""

    type: Literal["cross_attention"] = "cross_attention"


AttentionSpec = SelfAttentionSpec | CausalSelfAttentionSpec | CrossAttentionSpec

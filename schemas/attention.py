"""Multi-head attention sub-layers (Sec. 3.2.2): self, causal self, and cross to the encoder."""

from typing import Literal

from aiayn.schemas._base import PositiveInt, Probability
from aiayn.schemas.sublayer import SublayerSpec


class _AttentionSpec(SublayerSpec):
    h: PositiveInt
    d_k: PositiveInt
    d_v: PositiveInt
    bias: bool = True
    attn_dropout: Probability = 0.0  # not in the paper; tensor2tensor and fairseq offer it

    @property
    def kind(self) -> str:
        """self, causal_self or cross: what the block's queries may read."""
        return self.type.removesuffix("_attention")  # type: ignore[attr-defined]

    @property
    def table3(self) -> dict[str, int]:
        return {"h": self.h, "d_k": self.d_k, "d_v": self.d_v}

    @property
    def export_as(self) -> str | None:
        return self.type  # type: ignore[attr-defined]


class SelfAttentionSpec(_AttentionSpec):
    """Every position attends to every non-padding position of the same sequence."""

    type: Literal["self_attention"] = "self_attention"

    @property
    def looks_ahead(self) -> bool:
        return True


class CausalSelfAttentionSpec(_AttentionSpec):
    """Position i attends to positions <= i only (the decoder's masked self-attention)."""

    type: Literal["causal_self_attention"] = "causal_self_attention"


class CrossAttentionSpec(_AttentionSpec):
    """Queries from the decoder, keys and values from the encoder output."""

    type: Literal["cross_attention"] = "cross_attention"

    @property
    def reads_memory(self) -> bool:
        return True

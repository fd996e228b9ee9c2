"""Multi-head attention sub-layers (Sec. 3.2.2): self, causal self, and cross to the encoder."""

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from aiayn.schemas._base import FieldError, Float32, PositiveFloat32, PositiveInt, Probability, Spec
from aiayn.schemas.score import SoftmaxSpec
from aiayn.schemas.slots import AnyScore
from aiayn.schemas.sublayer import SublayerSpec


class RotarySpec(Spec):
    """Rotary position embeddings (Su et al. 2021), as GPT-NeoX and LLaMA apply them: the first
    `fraction` of each query and key head (an even number of dims) is rotated in pairs (i,
    i + r/2) by angles position * base^(-2i/r); the rest passes unrotated."""

    fraction: float = Field(default=1.0, gt=0.0, le=1.0)
    base: Float32 = Field(default=10000.0, gt=1.0)

    def dims(self, d_k: int) -> int:
        """The rotated dims of a head of d_k: fraction * d_k, rounded down to even."""
        return int(d_k * self.fraction) // 2 * 2


class AttentionSpec(SublayerSpec):
    """The base of an attention spec, a plugin's too: h, d_k, d_v and the parts (kv_heads,
    rotary); `causal` says whether its queries read only earlier positions, `reads_memory`
    (SublayerSpec's) whether its keys are the encoder's."""

    h: PositiveInt
    d_k: PositiveInt
    d_v: PositiveInt
    bias: bool = True
    attn_dropout: Probability = 0.0  # not in the paper; tensor2tensor and fairseq offer it
    # grouped-query attention (Ainslie et al. 2023): K and V with kv_heads heads, each serving
    # h / kv_heads query heads (1: multi-query, Shazeer 2019); None: h, the paper's
    kv_heads: PositiveInt | None = None
    rotary: RotarySpec | None = None  # self-attention only
    # QK-norm (Henry et al. 2020; Dehghani et al. 2023): an RMSNorm on each head's queries and
    # keys before their dot product, before rotary; self- and cross-attention alike
    qk_norm: bool = False
    # the step from scores to weights: softmax (eq. 1), or a registered other (sigmoid); a name alone is its type
    score: AnyScore = SoftmaxSpec()
    # logit soft-capping (Gemma 2): scores -> softcap * tanh(scores / softcap) before the biases,
    # the mask and the score step; Gemma 2 uses 50
    softcap: PositiveFloat32 | None = None

    @field_validator("score", mode="before")
    @classmethod
    def _score_by_name(cls, value: Any) -> Any:
        """`score: sigmoid` is short for `score: {type: sigmoid}`."""
        return {"type": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _seams(self) -> "AttentionSpec":
        if self.kv_heads is not None and self.h % self.kv_heads:
            divisors = [d for d in range(1, self.h + 1) if self.h % d == 0]
            raise FieldError(
                "kv_heads",
                f"{self.kv_heads} does not divide h ({self.h}): each K/V head serves h / kv_heads query heads; "
                f"use one of {divisors}",
            )
        if self.rotary is not None and self.reads_memory:
            raise FieldError(
                "rotary",
                "rotates the queries and keys of one sequence, but cross_attention's keys are the encoder's; "
                "give rotary to the self-attentions (and positional: none, if it is to be the only positions)",
            )
        if self.rotary is not None and self.d_k < 2:
            raise FieldError("rotary", f"rotates pairs of dims, and d_k ({self.d_k}) has fewer than 2; raise d_k or drop rotary")
        if self.rotary is not None and self.rotary.dims(self.d_k) < 2:
            raise FieldError(
                "rotary.fraction",
                f"{self.rotary.fraction} of d_k ({self.d_k}) rotates {self.rotary.dims(self.d_k)} dims; "
                f"at least 2 are needed: raise it to >= {2 / self.d_k:g}",
            )
        return self

    @property
    def switches(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        if self.kv_heads is not None and self.kv_heads != self.h:
            found["kv_heads"] = self.kv_heads
        if self.rotary is not None:
            found["rotary"] = self.rotary.fraction
        if self.qk_norm:
            found["qk_norm"] = True
        if self.softcap is not None:
            found["softcap"] = self.softcap
        return {**found, **self.score.switches}

    @property
    def causal(self) -> bool:
        """Its queries read only earlier positions (the decoder's masked self-attention)."""
        return False

    @property
    def table3(self) -> dict[str, int]:
        return {"h": self.h, "d_k": self.d_k, "d_v": self.d_v}

    @property
    def export_as(self) -> str | None:
        return self.type


class _PaperAttentionSpec(AttentionSpec):
    """The paper's three attentions, named in the figure as Figure 1 names them."""

    @property
    def figure_name(self) -> str | None:
        return "Masked Multi-Head Attention" if self.causal else "Multi-Head Attention"  # cross-attention: Figure 1's too


class SelfAttentionSpec(_PaperAttentionSpec):
    """Every position attends to every non-padding position of the same sequence."""

    type: Literal["self_attention"] = "self_attention"

    @property
    def looks_ahead(self) -> bool:
        return True


class CausalSelfAttentionSpec(_PaperAttentionSpec):
    """Position i attends to positions <= i only (the decoder's masked self-attention)."""

    type: Literal["causal_self_attention"] = "causal_self_attention"

    @property
    def causal(self) -> bool:
        return True


class CrossAttentionSpec(_PaperAttentionSpec):
    """Queries from the decoder, keys and values from the encoder output."""

    type: Literal["cross_attention"] = "cross_attention"

    @property
    def reads_memory(self) -> bool:
        return True

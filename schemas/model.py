"""The encoder-decoder model (Sec. 3, Figure 1)."""

from typing import Any

from pydantic import model_validator

from aiayn.schemas._base import FieldError, PositiveInt, Probability, Spec
from aiayn.schemas.embedding import EmbeddingSpec
from aiayn.schemas.positional import SinusoidalSpec
from aiayn.schemas.slots import AnyPositional
from aiayn.schemas.stacks import StackSpec
from aiayn.schemas.sublayer import SublayerSpec


def _misplaced(stack: str, sub: SublayerSpec) -> str | None:
    """Why `stack` may not hold `sub`, with the fix; None where it may."""
    if stack == "encoder" and sub.reads_memory:
        return f"{sub.type} needs an encoder output to attend to and is only allowed in the decoder; use self_attention here"
    if stack == "decoder" and sub.looks_ahead:
        return (
            f"{sub.type} in the decoder lets a position see later target tokens, which are not known when "
            "translating; use causal_self_attention"
        )
    return None


class ModelSpec(Spec):
    """`positional: none` is short for `positional: {type: none}`."""

    d_model: PositiveInt
    dropout: Probability = 0.1  # on the sums of embeddings and positional encodings
    embedding: EmbeddingSpec
    positional: AnyPositional = SinusoidalSpec()
    encoder: StackSpec
    decoder: StackSpec
    # the encoder reads each source sentence followed by </s>, as fairseq (its binarized data) and
    # Marian feed it; the paper does not say, and aiayn's default adds nothing
    source_eos: bool = False

    @model_validator(mode="before")
    @classmethod
    def _positional_none(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("positional") == "none":
            return {**data, "positional": {"type": "none"}}
        return data

    @model_validator(mode="after")
    def _check(self) -> "ModelSpec":
        if isinstance(self.positional, SinusoidalSpec) and self.d_model % 2:
            raise FieldError(
                "d_model",
                f"sinusoidal positions pair a sine with a cosine, so d_model must be even, got {self.d_model}",
            )
        for stack in ("encoder", "decoder"):
            for path, sub in getattr(self, stack).located():
                if message := _misplaced(stack, sub):
                    raise FieldError(f"{stack}.{path}.type", message)
        for stack in ("encoder", "decoder"):
            spec = getattr(self, stack)
            if spec.position_bias is not None:
                try:
                    spec.position_bias.check_in(bidirectional=stack == "encoder")
                except FieldError as e:
                    raise FieldError(f"{stack}.position_bias.{e.path}", e.message) from None
            heads = {s.table3["h"] for _, s in spec.located() if not s.reads_memory and "h" in s.table3}
            if spec.position_bias is not None and len(heads) > 1:
                raise FieldError(
                    f"{stack}.position_bias",
                    f"one bias for the whole stack needs its self-attentions to have one h, but they have {sorted(heads)}",
                )
        if not any(s.reads_memory for _, s in self.decoder.located()):
            raise FieldError(
                "decoder.layer",
                "the decoder has no cross_attention sub-layer, so it never sees the source "
                "sentence; add {type: cross_attention, h: ..., d_k: ..., d_v: ...}",
            )
        return self

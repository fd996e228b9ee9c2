"""The encoder-decoder model (Sec. 3, Figure 1)."""

from pydantic import model_validator

from schemas._base import FieldError, PositiveInt, Probability, Spec
from schemas.attention import CrossAttentionSpec, SelfAttentionSpec
from schemas.embedding import EmbeddingSpec
from schemas.positional import PositionalSpec, SinusoidalSpec
from schemas.stacks import StackSpec


class ModelSpec(Spec):
    d_model: PositiveInt
    dropout: Probability = 0.1  # on the sums of embeddings and positional encodings
    embedding: EmbeddingSpec
    positional: PositionalSpec = SinusoidalSpec()
    encoder: StackSpec
    decoder: StackSpec

    @model_validator(mode="after")
    def _check(self) -> "ModelSpec":
        if isinstance(self.positional, SinusoidalSpec) and self.d_model % 2:
            raise FieldError(
                "d_model",
                f"sinusoidal positions pair a sine with a cosine, so d_model must be even, "
                f"got {self.d_model}",
            )
        for path, sub in self.encoder.located():
            if isinstance(sub, CrossAttentionSpec):
                raise FieldError(
                    f"encoder.{path}.type",
                    "cross_attention needs an encoder output to attend to and is only allowed "
                    "in the decoder; use self_attention here",
                )
        for path, sub in self.decoder.located():
            if isinstance(sub, SelfAttentionSpec):
                raise FieldError(
                    f"decoder.{path}.type",
                    "self_attention in the decoder lets a position see later target tokens, "
                    "which are not known when translating; use causal_self_attention",
                )
        if not any(isinstance(s, CrossAttentionSpec) for _, s in self.decoder.located()):
            raise FieldError(
                "decoder.layer",
                "the decoder has no cross_attention sub-layer, so it never sees the source "
                "sentence; add {type: cross_attention, h: ..., d_k: ..., d_v: ...}",
            )
        return self

"""The encoder-decoder model (Sec. 3, Figure 1)."""

from pydantic import model_validator

from aiayn.schemas._base import FieldError, PositiveInt, Probability, Spec
from aiayn.schemas.attention import CrossAttentionSpec, SelfAttentionSpec
from aiayn.schemas.embedding import EmbeddingSpec
from aiayn.schemas.positional import PositionalSpec, SinusoidalSpec
from aiayn.schemas.stacks import StackSpec

# (stack, a sub-layer kind it must not hold, why and the fix)
_MISPLACED = (
    ("encoder", CrossAttentionSpec, "cross_attention needs an encoder output to attend to and is only allowed "
     "in the decoder; use self_attention here"),
    ("decoder", SelfAttentionSpec, "self_attention in the decoder lets a position see later target tokens, "
     "which are not known when translating; use causal_self_attention"),
)  # fmt: skip


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
        for stack, kind, message in _MISPLACED:
            for path, sub in getattr(self, stack).located():
                if isinstance(sub, kind):
                    raise FieldError(f"{stack}.{path}.type", message)
        if not any(isinstance(s, CrossAttentionSpec) for _, s in self.decoder.located()):
            raise FieldError(
                "decoder.layer",
                "the decoder has no cross_attention sub-layer, so it never sees the source "
                "sentence; add {type: cross_attention, h: ..., d_k: ..., d_v: ...}",
            )
        return self

"""Token embeddings and the pre-softmax projection (Sec. 3.4)."""

from typing import Literal

from pydantic import NonNegativeInt, model_validator

from aiayn.schemas._base import FieldError, PositiveInt, Spec
from aiayn.schemas.slots import AnyNorm


class EmbeddingSpec(Spec):
    """share: none (three matrices), target_output (target embedding = output projection),
    all (source, target and output share one matrix; needs a shared vocabulary). `segments`: a
    table of that many segment (token type) embeddings added to every input (BERT's 2, RoBERTa's
    1; 0: none); `norm`: a norm of the sum of the embeddings and positions, before the dropout
    (BERT's LayerNorm; none: the paper's)."""

    vocab_size: PositiveInt
    shared_vocab: bool = True
    share: Literal["none", "target_output", "all"] = "all"
    scale: bool = True  # multiply embeddings by sqrt(d_model)
    output_bias: bool = False
    segments: NonNegativeInt = 0
    norm: AnyNorm | None = None

    @model_validator(mode="after")
    def _sharing_needs_shared_vocab(self) -> "EmbeddingSpec":
        if self.share == "all" and not self.shared_vocab:
            raise FieldError(
                "share",
                "'all' ties the source embedding to the target embedding, which needs a "
                "shared vocabulary, but shared_vocab is false; set shared_vocab: true, or "
                "share: target_output (or none)",
            )
        return self

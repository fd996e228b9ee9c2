"""Token embeddings and the pre-softmax projection (Sec. 3.4)."""

from typing import Literal

from pydantic import model_validator

from aiayn.schemas._base import FieldError, PositiveInt, Spec


class EmbeddingSpec(Spec):
    """share: none (three matrices), target_output (target embedding = output projection),
    all (source, target and output share one matrix; needs a shared vocabulary)."""

    vocab_size: PositiveInt
    shared_vocab: bool = True
    share: Literal["none", "target_output", "all"] = "all"
    scale: bool = True  # multiply embeddings by sqrt(d_model)
    output_bias: bool = False

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

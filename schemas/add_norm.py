"""The residual connection around each sub-layer (Sec. 3.1, 5.4)."""

from typing import Literal

from pydantic import Field

from aiayn.schemas._base import Probability, Spec


class AddNormSpec(Spec):
    """post: LayerNorm(x + Dropout(Sublayer(x))), the paper's; pre: x + Dropout(Sublayer(LayerNorm(x)))."""

    placement: Literal["post", "pre"] = "post"
    dropout: Probability = 0.1
    eps: float = Field(default=1e-6, gt=0.0)

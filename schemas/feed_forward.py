"""Position-wise feed-forward sub-layer (Sec. 3.3, eq. 2)."""

from typing import Literal

from aiayn.schemas._base import PositiveInt, Probability
from aiayn.schemas.sublayer import SublayerSpec


class FeedForwardSpec(SublayerSpec):
    type: Literal["feed_forward"] = "feed_forward"
    d_ff: PositiveInt
    activation: Literal["relu", "gelu", "silu"] = "relu"
    activation_dropout: Probability = 0.0  # "ReLU dropout" of tensor2tensor; not in the paper
    bias: bool = True

    @property
    def table3(self) -> dict[str, int]:
        return {"d_ff": self.d_ff}

    @property
    def export_as(self) -> str | None:
        return "feed_forward"

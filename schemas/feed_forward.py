"""Position-wise feed-forward sub-layer (Sec. 3.3, eq. 2)."""

from typing import Literal

from aiayn.schemas._base import PositiveInt, Probability, Spec


class FeedForwardSpec(Spec):
    type: Literal["feed_forward"] = "feed_forward"
    d_ff: PositiveInt
    activation: Literal["relu", "gelu", "silu"] = "relu"
    activation_dropout: Probability = 0.0  # "ReLU dropout" of tensor2tensor; not in the paper
    bias: bool = True

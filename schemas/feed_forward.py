"""Position-wise feed-forward sub-layer (Sec. 3.3, eq. 2)."""

from typing import Literal

from aiayn.schemas._base import PositiveInt, Probability
from aiayn.schemas.sublayer import SublayerSpec


class _FeedForwardSpec(SublayerSpec):
    """What the plain and the gated feed-forward share: the inner width d_ff (Table 3's column)."""

    d_ff: PositiveInt
    activation_dropout: Probability = 0.0  # "ReLU dropout" of tensor2tensor; not in the paper
    bias: bool = True

    @property
    def table3(self) -> dict[str, int]:
        return {"d_ff": self.d_ff}


class FeedForwardSpec(_FeedForwardSpec):
    type: Literal["feed_forward"] = "feed_forward"
    # gelu_tanh: GELU's tanh approximation (GPT-2's "gelu_new", BERT's original)
    activation: Literal["relu", "gelu", "gelu_tanh", "silu"] = "relu"

    @property
    def export_as(self) -> str | None:
        return "feed_forward"

    @property
    def figure_name(self) -> str | None:
        return "Feed Forward" if self.activation == "relu" else f"Feed Forward ({self.activation.upper()})"


class GatedFeedForwardSpec(_FeedForwardSpec):
    """FFN_GLU(x) = (act(x W) * (x V)) W_2 (Shazeer 2020): SwiGLU with silu, GEGLU with gelu,
    ReGLU with relu. Three matrices where the paper's has two: d_ff is the width of each of W and
    V, so the same d_ff has 1.5 times the parameters (2/3 of the paper's d_ff keeps them equal)."""

    type: Literal["gated_feed_forward"] = "gated_feed_forward"
    activation: Literal["silu", "gelu", "relu"] = "silu"

    @property
    def variant(self) -> str:
        return {"silu": "swiglu", "gelu": "geglu", "relu": "reglu"}[self.activation]

    @property
    def switches(self) -> dict[str, str]:
        return {"ffn": self.variant}

    @property
    def export_as(self) -> str | None:
        return "gated_feed_forward"

    @property
    def figure_name(self) -> str | None:
        return f"Gated Feed Forward ({ {'swiglu': 'SwiGLU', 'geglu': 'GEGLU', 'reglu': 'ReGLU'}[self.variant] })"

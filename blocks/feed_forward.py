"""Position-wise feed-forward networks: the paper's (Sec 3.3, eq. 2) and the gated (GLU) ones."""

from __future__ import annotations

from torch import Tensor, nn

from aiayn.blocks.context import LayerContext
from aiayn.blocks.dropout import Dropout
from aiayn.blocks.sublayer import Sublayer


class PositionwiseFeedForward(Sublayer):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied to each position separately (eq. 2).

    The activation is passed in (nn.ReLU() is the paper's).

    :param d_model: the width of x and of the output
    :param d_ff: the width of the inner layer
    :param activation: the module between the two projections (nn.ReLU() is the paper's)
    :param activation_dropout: dropout on the inner layer's units (off in the paper)
    :param bias: the projections have biases (the paper's)
    """

    def __init__(
        self,
        *,
        d_model: int,
        d_ff: int,
        activation: nn.Module,
        activation_dropout: float = 0.0,
        bias: bool = True,
    ) -> None:
        super().__init__()
        for name, value in (("d_model", d_model), ("d_ff", d_ff)):
            if value < 1:
                raise ValueError(f"{name} ({value}) must be >= 1")
        if not 0.0 <= activation_dropout < 1.0:
            raise ValueError(f"activation_dropout ({activation_dropout}) must be in [0, 1)")
        self.w_1 = nn.Linear(d_model, d_ff, bias=bias)
        self.activation = activation
        self.dropout = Dropout(activation_dropout)
        self.w_2 = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: Tensor, ctx: LayerContext) -> Tensor:
        inner = self.dropout(self.activation(self.w_1(x)))  # (B, T, d_ff)
        return self.w_2(inner)  # (B, T, d_model)

    def projections(self) -> dict[str, tuple[Tensor, Tensor | None]]:
        """(weight (out, in), bias) of W_1 and W_2."""
        return {"w_1": (self.w_1.weight, self.w_1.bias), "w_2": (self.w_2.weight, self.w_2.bias)}


class GatedFeedForward(Sublayer):
    """FFN_GLU(x) = (act(x W) * (x V)) W_2 (Shazeer 2020): SwiGLU (SiLU), GEGLU (GELU), ReGLU
    (ReLU). W and V are one fused projection `w_1` (d_model -> 2 d_ff: W's rows, then V's);
    `activation_dropout` drops units of the gated d_ff-wide layer."""

    def __init__(
        self, *, d_model: int, d_ff: int, activation: nn.Module, activation_dropout: float = 0.0, bias: bool = True
    ) -> None:
        super().__init__()
        for name, value in (("d_model", d_model), ("d_ff", d_ff)):
            if value < 1:
                raise ValueError(f"{name} ({value}) must be >= 1")
        self.d_ff = d_ff
        self.w_1 = nn.Linear(d_model, 2 * d_ff, bias=bias)
        self.activation = activation
        self.dropout = Dropout(activation_dropout)
        self.w_2 = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: Tensor, ctx: LayerContext) -> Tensor:
        gate, up = self.w_1(x).chunk(2, dim=-1)  # (B, T, d_ff) each
        return self.w_2(self.dropout(self.activation(gate) * up))  # (B, T, d_model)

    def projections(self) -> dict[str, tuple[Tensor, Tensor | None]]:
        """(weight (out, in), bias) of W (the activated one, as w_1), V (w_up) and W_2."""
        weight, bias = (
            self.w_1.weight.split(self.d_ff),
            self.w_1.bias.split(self.d_ff) if self.w_1.bias is not None else (None, None),
        )
        return {"w_1": (weight[0], bias[0]), "w_up": (weight[1], bias[1]), "w_2": (self.w_2.weight, self.w_2.bias)}

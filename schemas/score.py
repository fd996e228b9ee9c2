"""The score step of an attention: scores (Q K^T / sqrt(d_k), with the biases and the mask) to
the weights that mix the values. The paper's is the softmax (eq. 1); a step is a registered type
(slot `score`), so that a plugin that changes only this step is one small spec and a builder."""

from typing import TYPE_CHECKING, Any, Literal

from aiayn.schemas._base import Float32, Spec


class ScoreSpec(Spec):
    """The base of a score step's spec (a plugin's too): a `type: Literal["name"]` field and its own fields."""

    if TYPE_CHECKING:
        type: str  # each subclass's `type: Literal["name"]` field, its tag in the YAML

    @property
    def switches(self) -> dict[str, Any]:
        """{"score": its type} where it is not the paper's softmax (what export refuses, the figure draws)."""
        return {"score": self.type}


class SoftmaxSpec(ScoreSpec):
    """softmax over the keys (eq. 1): the paper's."""

    type: Literal["softmax"] = "softmax"

    @property
    def switches(self) -> dict[str, Any]:
        return {}


class SigmoidSpec(ScoreSpec):
    """Sigmoid attention (Ramapuram et al. 2024): each weight sigmoid(score + b) on its own;
    b = -log n, n the keys a query reads (null), or a fixed number."""

    type: Literal["sigmoid"] = "sigmoid"
    bias: Float32 | None = None

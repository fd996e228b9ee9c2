"""The residual connection around each sub-layer (Sec. 3.1, 5.4)."""

from typing import Any, Literal

from pydantic import model_validator

from aiayn.schemas._base import FieldError, Probability, Spec
from aiayn.schemas.norm import LayerNormSpec
from aiayn.schemas.slots import AnyNorm


class AddNormSpec(Spec):
    """post: Norm(x + Dropout(Sublayer(x))), the paper's; pre: x + Dropout(Sublayer(Norm(x))).
    `norm` is the normaliser (LayerNorm, the paper's, by default), also the stack's final norm."""

    placement: Literal["post", "pre"] = "post"
    dropout: Probability = 0.1
    norm: AnyNorm = LayerNormSpec()

    @model_validator(mode="before")
    @classmethod
    def _eps_of_release_0_1(cls, data: Any) -> Any:
        """`add_norm: {eps: 1e-6}`, as aiayn 0.1 wrote it (its run directories and checkpoints
        keep it), is `add_norm: {norm: {type: layer_norm, eps: 1e-6}}`."""
        if not isinstance(data, dict) or "eps" not in data:
            return data
        if "norm" in data:
            raise FieldError("eps", "is aiayn 0.1's form of norm.eps, and norm is given too; set norm.eps alone")
        rest = {k: v for k, v in data.items() if k != "eps"}
        return {**rest, "norm": {"type": "layer_norm", "eps": data["eps"]}}

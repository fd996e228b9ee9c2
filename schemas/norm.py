"""The normaliser of add & norm and of a stack's final norm (Sec. 3.1: LayerNorm, Ba et al. 2016)."""

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from aiayn.schemas._base import Float32, Spec


class NormSpec(Spec):
    """The base of a norm spec (a plugin's too): a `type: Literal["name"]` field and its own fields."""

    if TYPE_CHECKING:
        type: str  # each subclass's `type: Literal["name"]` field, its tag in the YAML

    @property
    def switches(self) -> dict[str, str]:
        """{"norm": its type} where it is not the paper's LayerNorm."""
        return {"norm": self.type}

    @property
    def export_as(self) -> str | None:
        """layer_norm where other runtimes have this norm (with its `eps`), else None."""
        return None

    @property
    def figure_name(self) -> str | None:
        """Its name in the model figure: the paper's words for the paper's blocks; None: its
        registration's label."""
        return None


class LayerNormSpec(NormSpec):
    """LayerNorm(x) = gamma * (x - mean) / sqrt(var + eps) + beta over d_model (the paper's)."""

    type: Literal["layer_norm"] = "layer_norm"
    eps: Float32 = Field(default=1e-6, gt=0.0)

    @property
    def switches(self) -> dict[str, str]:
        return {}

    @property
    def export_as(self) -> str | None:
        return "layer_norm"

    @property
    def figure_name(self) -> str | None:
        return "Norm"  # Figure 1's "Add & Norm"


class RMSNormSpec(NormSpec):
    """RMSNorm(x) = gamma * x / sqrt(mean(x^2) + eps) (Zhang and Sennrich 2019): no centring, no
    bias; torch.nn.RMSNorm. T5, LLaMA and their successors normalise so."""

    type: Literal["rms_norm"] = "rms_norm"
    eps: Float32 = Field(default=1e-6, gt=0.0)

    @property
    def export_as(self) -> str | None:
        return "rms_norm"

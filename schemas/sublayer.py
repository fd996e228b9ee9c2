"""What every sub-layer spec says about itself, so that no code tests the paper's classes."""

from typing import TYPE_CHECKING, Any

from aiayn.schemas._base import Spec


class SublayerSpec(Spec):
    """The base of a sub-layer spec (a plugin's too): a `type: Literal["name"]` field, its own
    fields, and these properties, which the model's checks, `aiayn show` and export read."""

    if TYPE_CHECKING:
        type: str  # each subclass's `type: Literal["name"]` field, its tag in the YAML

    @property
    def reads_memory(self) -> bool:
        """It attends to the encoder output: allowed only in the decoder, which needs one."""
        return False

    @property
    def looks_ahead(self) -> bool:
        """A position reads later positions of its own sequence: not allowed in the decoder,
        whose later target tokens are unknown while translating."""
        return False

    @property
    def table3(self) -> dict[str, int]:
        """The Table 3 columns this sub-layer sets (h, d_k, d_v for attention; d_ff)."""
        return {}

    @property
    def switches(self) -> dict[str, Any]:
        """How it departs from the paper, as `aiayn show`'s Table 3 columns name it (e.g.
        {"ffn": "swiglu"}, {"kv_heads": 2}); empty where it is the paper's."""
        return {}

    @property
    def figure_name(self) -> str | None:
        """Its name in the model figure: the paper's words for the paper's blocks; None: its
        registration's label."""
        return None

    @property
    def export_as(self) -> str | None:
        """The paper's sub-layer this is exported as (self_attention, causal_self_attention,
        cross_attention, feed_forward), or None where no other runtime has it."""
        return None

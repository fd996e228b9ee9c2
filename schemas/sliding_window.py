"""Sliding-window self-attention (Beltagy et al. 2020, "Longformer"; Mistral's decoder): a causal
self-attention whose queries read only the last `window` positions, themselves included."""

from typing import Any, Literal

from aiayn.schemas._base import PositiveInt
from aiayn.schemas.attention import AttentionSpec


class SlidingWindowAttentionSpec(AttentionSpec):
    type: Literal["sliding_window_attention"] = "sliding_window_attention"
    window: PositiveInt

    @property
    def causal(self) -> bool:
        return True

    @property
    def switches(self) -> dict[str, Any]:
        return {**super().switches, "window": self.window}

    @property
    def export_as(self) -> str | None:
        return None  # no other runtime has it: export refuses it by name

    @property
    def figure_name(self) -> str | None:
        return f"Masked Multi-Head Attention (window {self.window})"

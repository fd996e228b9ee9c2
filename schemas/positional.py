"""Positional encodings (Sec. 3.5): sinusoids, learned embeddings (Table 3 row E), or none (for
relative schemes: rotary attention, ALiBi, T5's bias)."""

from typing import TYPE_CHECKING, Literal

from pydantic import NonNegativeInt

from aiayn.schemas._base import PositiveInt, Spec


class PositionalSpec(Spec):
    """The base of a positional spec (a plugin's too): the module added to the scaled token
    embeddings of each side, forward(length, offset) -> (length, d_model)."""

    if TYPE_CHECKING:
        type: str  # each subclass's `type: Literal["name"]` field, its tag in the YAML

    @property
    def max_positions(self) -> int | None:
        """How many positions it covers (None: any number)."""
        return None

    @property
    def export_as(self) -> str | None:
        """sinusoidal or learned where other runtimes have it, else None."""
        return None

    @property
    def figure_name(self) -> str | None:
        """Its name in the model figure (None: its registration's label); "" draws nothing."""
        return None


class SinusoidalSpec(PositionalSpec):
    """interleaved: sin at 2i, cos at 2i+1 (the paper's equation); concatenated: all sines,
    then all cosines (tensor2tensor and fairseq)."""

    type: Literal["sinusoidal"] = "sinusoidal"
    layout: Literal["interleaved", "concatenated"] = "interleaved"

    @property
    def export_as(self) -> str | None:
        return "sinusoidal"

    @property
    def figure_name(self) -> str | None:
        return "Positional Encoding"


class LearnedSpec(PositionalSpec):
    """One learned vector per position (Table 3 row E). `first`: the table's row of position 0,
    the rows before it never read (RoBERTa's and fairseq's padding_idx + 1 = 2; aiayn's 0)."""

    type: Literal["learned"] = "learned"
    max_len: PositiveInt
    first: NonNegativeInt = 0

    @property
    def max_positions(self) -> int | None:
        return self.max_len

    @property
    def export_as(self) -> str | None:
        return "learned" if self.first == 0 else None  # no exported format skips rows

    @property
    def figure_name(self) -> str | None:
        return "Positional Embedding (learned)"


class NoPositionsSpec(PositionalSpec):
    """No absolute positions: the embeddings alone, for a model whose attention knows positions
    otherwise (rotary on its self-attention, a stack's ALiBi or T5 bias)."""

    type: Literal["none"] = "none"

    @property
    def export_as(self) -> str | None:
        return "none"

    @property
    def figure_name(self) -> str | None:
        return ""

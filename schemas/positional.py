"""Positional encodings (Sec. 3.5): sinusoids, or learned embeddings (Table 3 row E)."""

from typing import Annotated, Literal

from pydantic import Field

from aiayn.schemas._base import PositiveInt, Spec


class SinusoidalSpec(Spec):
    """interleaved: sin at 2i, cos at 2i+1 (the paper's equation); concatenated: all sines,
    then all cosines (tensor2tensor and fairseq)."""

    type: Literal["sinusoidal"] = "sinusoidal"
    layout: Literal["interleaved", "concatenated"] = "interleaved"


class LearnedSpec(Spec):
    type: Literal["learned"] = "learned"
    max_len: PositiveInt


PositionalSpec = Annotated[SinusoidalSpec | LearnedSpec, Field(discriminator="type")]

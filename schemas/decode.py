"""Beam search as in Sec. 6.1: beam 4, length penalty alpha 0.6, output length <= input + 50."""

from typing import Literal

from pydantic import Field

from aiayn.schemas._base import Float32, PositiveInt, Spec


class DecodeSpec(Spec):
    """length_penalty: gnmt divides log-probabilities by ((5+|Y|)/6)^alpha (the paper's, from
    Wu et al. 2016); fairseq divides by |Y|^alpha."""

    beam: PositiveInt = 4
    alpha: Float32 = Field(default=0.6, ge=0.0)
    length_penalty: Literal["gnmt", "fairseq"] = "gnmt"
    max_len_b: int = Field(default=50, ge=0)
    max_tokens: PositiveInt = 4000  # source tokens per decoding batch
    max_input_len: PositiveInt = 1024  # longer input lines are refused (the output may be max_len_b longer)

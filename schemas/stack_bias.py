"""A score bias owned by a stack and shared by its layers' self-attentions (as T5's relative
position bias is): the base of its specs, ALiBi and T5's bias."""

from typing import Literal

from aiayn.schemas._base import PositiveInt, Spec


class StackBiasSpec(Spec):
    """The base of a stack-level bias spec: a `type: Literal["name"]` field and its own fields.
    The block it builds is called as bias(T, S) -> (h or 1, T, S), added to the scores of every
    self-attention of the stack (queries are the last T of the S key positions)."""

    @property
    def switches(self) -> dict[str, str]:
        return {"position_bias": self.type}  # type: ignore[attr-defined]


class AlibiSpec(StackBiasSpec):
    """ALiBi (Press et al. 2022): head i adds -m_i * (distance from the query), with the paper's
    geometric slopes m_i (2^(-8/h) ... for h a power of 2, interleaved otherwise). The decoder's
    bias is causal (keys before the query), the encoder's symmetric (-m_i * |i - j|)."""

    type: Literal["alibi"] = "alibi"


class T5BiasSpec(StackBiasSpec):
    """T5's relative position bias (Raffel et al. 2020): one learned scalar per head and bucket of
    relative distance, one table for the stack, shared by its layers; buckets as transformers'
    T5 (exact below num_buckets / 2, then logarithmic up to max_distance; the encoder's
    bidirectional, the decoder's one-sided). Scores keep the paper's 1 / sqrt(d_k)."""

    type: Literal["t5"] = "t5"
    num_buckets: PositiveInt = 32
    max_distance: PositiveInt = 128

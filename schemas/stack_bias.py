"""A score bias owned by a stack and shared by its layers' self-attentions (as T5's relative
position bias is): the base of its specs, ALiBi and T5's bias."""

from typing import TYPE_CHECKING, Literal

from aiayn.schemas._base import FieldError, PositiveInt, Spec


class StackBiasSpec(Spec):
    """The base of a stack-level bias spec: a `type: Literal["name"]` field and its own fields.
    The block it builds is called as bias(T, S) -> (h or 1, T, S), added to the scores of every
    self-attention of the stack (queries are the last T of the S key positions)."""

    if TYPE_CHECKING:
        type: str  # each subclass's `type: Literal["name"]` field, its tag in the YAML

    @property
    def switches(self) -> dict[str, str]:
        return {"position_bias": self.type}

    def check_in(self, *, bidirectional: bool) -> None:
        """Refuse (a FieldError at one of this spec's keys) settings that cannot work in a stack
        whose self-attention is bidirectional (the encoder's) or causal (the decoder's); the
        model's validator calls it. Nothing by default."""


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

    def check_in(self, *, bidirectional: bool) -> None:
        """Each direction has num_buckets (halved when bidirectional) buckets, half of them exact
        distances: at least one exact bucket, and logarithmic ones reaching beyond them."""
        per_direction = self.num_buckets // 2 if bidirectional else self.num_buckets
        exact = per_direction // 2
        which = "the encoder's bidirectional" if bidirectional else "the decoder's one-sided"
        if exact < 1:
            least = 4 if bidirectional else 2
            raise FieldError(
                "num_buckets",
                f"{self.num_buckets} leaves no exact-distance bucket in {which} bias ({per_direction} "
                f"{'per direction' if bidirectional else 'in all'}, half of them exact); use num_buckets >= {least} (T5: 32)",
            )
        if self.max_distance <= exact:
            raise FieldError(
                "max_distance",
                f"{self.max_distance} must be greater than {exact}, where {which} bias (num_buckets {self.num_buckets}) "
                f"begins its logarithmic buckets; raise it above {exact} (T5: 128) or lower num_buckets",
            )

"""The model: the encoder-decoder of Sec. 3 (Figure 1), or its decoder alone (a decoder-only model:
a language model, or translation read as `<s> source <sep> target`), from the same stacks."""

from typing import Any

from pydantic import model_validator

from aiayn.schemas._base import FieldError, PositiveInt, Probability, Spec
from aiayn.schemas.embedding import EmbeddingSpec
from aiayn.schemas.graph import EncoderDecoderSpec, graph_of_release
from aiayn.schemas.positional import SinusoidalSpec
from aiayn.schemas.slots import AnyGraph, AnyPositional
from aiayn.schemas.stacks import StackSpec
from aiayn.schemas.sublayer import SublayerSpec


def _misplaced(stack: str, sub: SublayerSpec, *, encoder: bool = True) -> str | None:
    """Why `stack` may not hold `sub`, with the fix; None where it may (`encoder`: the graph has one)."""
    if stack == "encoder" and sub.reads_memory:
        return f"{sub.type} needs an encoder output to attend to and is only allowed in the decoder; use self_attention here"
    if not encoder and sub.reads_memory:
        return (
            f"{sub.type} attends to an encoder's output, and this model has none (model.encoder is absent: a "
            "decoder-only model); remove it, or add an encoder"
        )
    if stack == "decoder" and sub.looks_ahead:
        return (
            f"{sub.type} in the decoder lets a position see later target tokens, which are not known when "
            "translating; use causal_self_attention"
        )
    return None


class ModelSpec(Spec):
    """`positional: none` is short for `positional: {type: none}`. `graph` says how the stacks are
    wired (schemas/graph.py: encoder_decoder, the paper's; decoder_only, GPT's graph and fairseq's
    transformer_lm: no encoder, no cross-attention, one embedding). Where it is not given, it is
    the decoder alone if `encoder` is absent, as aiayn read a model before it named the graph."""

    graph: AnyGraph = EncoderDecoderSpec()
    d_model: PositiveInt
    dropout: Probability = 0.1  # on the sums of embeddings and positional encodings
    embedding: EmbeddingSpec
    positional: AnyPositional = SinusoidalSpec()
    encoder: StackSpec | None = None
    decoder: StackSpec | None = None
    # the encoder reads each source sentence followed by </s>, as fairseq (its binarized data) and
    # Marian feed it; the paper does not say, and aiayn's default adds nothing
    source_eos: bool = False

    @property
    def stacks(self) -> dict[str, StackSpec]:
        """The model's stacks by name, the encoder's first where it has one."""
        return {name: s for name, s in (("encoder", self.encoder), ("decoder", self.decoder)) if s is not None}

    def stack(self, name: str) -> StackSpec:
        """The stack `name` (encoder, decoder) of a graph that has one (its spec's check_model made sure)."""
        found = self.stacks.get(name)
        if found is None:
            raise ValueError(f"model.{name} is absent: graph {self.graph.type} has no {name}")
        return found

    @model_validator(mode="before")
    @classmethod
    def _positional_none(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("positional") == "none":
            data = {**data, "positional": {"type": "none"}}
        return graph_of_release(data) if isinstance(data, dict) else data

    @model_validator(mode="after")
    def _check(self) -> "ModelSpec":
        if isinstance(self.positional, SinusoidalSpec) and self.d_model % 2:
            raise FieldError(
                "d_model",
                f"sinusoidal positions pair a sine with a cosine, so d_model must be even, got {self.d_model}",
            )
        self.graph.check_model(self)
        for stack, spec in self.stacks.items():
            for path, sub in spec.located():
                if message := _misplaced(stack, sub, encoder=self.graph.has_encoder):
                    raise FieldError(f"{stack}.{path}.type", message)
            if spec.position_bias is not None:
                try:
                    spec.position_bias.check_in(bidirectional=stack == "encoder")
                except FieldError as e:
                    raise FieldError(f"{stack}.position_bias.{e.path}", e.message) from None
            heads = {s.table3["h"] for _, s in spec.located() if not s.reads_memory and "h" in s.table3}
            if spec.position_bias is not None and len(heads) > 1:
                raise FieldError(
                    f"{stack}.position_bias",
                    f"one bias for the whole stack needs its self-attentions to have one h, but they have {sorted(heads)}",
                )
        return self

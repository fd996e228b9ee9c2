"""The open unions of the experiment format, and how they are validated.

A slot is a place in an experiment that a registered spec class fills: a sub-layer of a layer
(`sublayer`), the normaliser of add & norm (`norm`), the positions added to each side's
embeddings (`positional`), a score bias a stack shares among its layers (`stack_bias`), the step
from an attention's scores to its weights (`score`), a step of the text pipeline (`text_step`), the
tokenizer (`tokenizer`), the utility of minimum-Bayes-risk decoding (`utility`, chosen on the
command line, not in YAML), the model's graph (`graph`), a filter of sampling
(`sampling_filter`, chosen where sampling is: `--filter`, `filters=`), the decoding strategy (`strategy`:
`decode.strategy`, `--strategy`, `strategy=`). A field typed with a slot (`AnySublayer`, ...) validates as a union
discriminated by `type` over the classes that the registry given to validation registers for the
slot: `ExperimentSpec.model_validate(data, context=registry.context)` (builder/registry.py). The
schemas hold no registrations and load none: builder/plugins.py makes a registry from the entry
points, at the top of the program.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Protocol

from pydantic import GetCoreSchemaHandler, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from aiayn.schemas._base import Spec
from aiayn.schemas.graph import GraphSpec
from aiayn.schemas.norm import NormSpec
from aiayn.schemas.positional import PositionalSpec
from aiayn.schemas.sampling_filter import SamplingFilterSpec
from aiayn.schemas.score import ScoreSpec
from aiayn.schemas.stack_bias import StackBiasSpec
from aiayn.schemas.strategy import StrategySpec
from aiayn.schemas.sublayer import SublayerSpec
from aiayn.schemas.text_step import TextStepSpec
from aiayn.schemas.tokenizer import TokenizerSpec
from aiayn.schemas.utility import UtilitySpec

OWN = "aiayn"  # the distribution whose entry point registers the built-in blocks


class PluginError(ValueError):
    """A plugin that cannot be loaded, or a registration that cannot be taken (one line)."""


class Members(Protocol):
    """What validation needs of a registry (builder/registry.py's Registry)."""

    def classes(self, slot: str) -> Mapping[str, type[Spec]]: ...


class Slot:
    """A pydantic annotation: `Annotated[SublayerSpec, SUBLAYER]` validates as the union of the
    classes the validation's registry registers for the slot, discriminated by their `type`."""

    def __init__(self, name: str, base: type[Spec], what: str) -> None:
        self.name, self.base, self.what = name, base, what

    def classes(self, registry: Members) -> list[type[Spec]]:
        """The classes `registry` registers for this slot."""
        return list(registry.classes(self.name).values())

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.with_info_plain_validator_function(self._validate, metadata={"aiayn_slot": self.name})

    def _validate(self, value: Any, info: core_schema.ValidationInfo) -> Spec:
        registry = (info.context or {}).get("registry")
        if isinstance(value, self.base) and (registry is None or type(value) in self.classes(registry)):
            return value  # made and validated already
        if registry is None:
            raise TypeError(
                f"a {self.what} ({type(value).__name__}) validates against a registry: "
                "model_validate(data, context=registry.context)"
            )
        if isinstance(value, Spec):
            raise PydanticCustomError(
                "unregistered", "{name} is not a registered {what} type", {"name": type(value).__name__, "what": self.what}
            )
        classes = tuple(self.classes(registry))
        if not classes:  # aiayn registers a type of every slot
            raise TypeError(f"no {self.what} type is registered: is aiayn installed whole?")
        return _union(classes).validate_python(value, context=info.context)

    def __repr__(self) -> str:
        return f"Slot({self.name!r})"


class _Tagged:
    """The annotation of a union of spec classes discriminated by `type`."""

    def __init__(self, classes: tuple[type[Spec], ...]) -> None:
        self.classes = classes

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        choices = {type_tag(cls): handler.generate_schema(cls) for cls in self.classes}
        return core_schema.tagged_union_schema(choices, discriminator="type")


@functools.lru_cache(maxsize=256)
def _union(classes: tuple[type[Spec], ...]) -> TypeAdapter[Any]:
    """A validator of the union of `classes` (kept for each set of classes a registry gives)."""
    return TypeAdapter(Annotated[Any, _Tagged(classes)])


def json_schema(model: type[Spec], registry: Members) -> dict[str, Any]:
    """`model`'s JSON Schema, each slot the union of what `registry` registers for it,
    discriminated by `type`."""

    inside: list[str] = []  # the slots being written (a sum of stack biases holds stack biases)

    class WithSlots(GenerateJsonSchema):
        def function_plain_schema(self, schema: core_schema.PlainValidatorFunctionSchema) -> JsonSchemaValue:
            slot = (schema.get("metadata") or {}).get("aiayn_slot")
            if slot is None:
                return super().function_plain_schema(schema)
            if slot in inside:
                return {"type": "object", "description": f"a {SLOTS[slot].what}, one of the types above"}
            inside.append(slot)
            try:
                return self.generate_inner(_union(tuple(SLOTS[slot].classes(registry))).core_schema)
            finally:
                inside.pop()

    return model.model_json_schema(schema_generator=WithSlots)


SUBLAYER = Slot("sublayer", SublayerSpec, "sub-layer")
NORM = Slot("norm", NormSpec, "norm")
POSITIONAL = Slot("positional", PositionalSpec, "positional encoding")
STACK_BIAS = Slot("stack_bias", StackBiasSpec, "stack-level bias")
SCORE = Slot("score", ScoreSpec, "score step")
TEXT_STEP = Slot("text_step", TextStepSpec, "text pipeline step")
TOKENIZER = Slot("tokenizer", TokenizerSpec, "tokenizer")
UTILITY = Slot("utility", UtilitySpec, "MBR utility")
GRAPH = Slot("graph", GraphSpec, "graph")
SAMPLING_FILTER = Slot("sampling_filter", SamplingFilterSpec, "sampling filter")
STRATEGY = Slot("strategy", StrategySpec, "decoding strategy")
SLOTS = {
    slot.name: slot
    for slot in (SUBLAYER, NORM, POSITIONAL, STACK_BIAS, SCORE, TEXT_STEP, TOKENIZER, UTILITY, GRAPH, SAMPLING_FILTER, STRATEGY)
}

AnySublayer = Annotated[SublayerSpec, SUBLAYER]
AnyNorm = Annotated[NormSpec, NORM]
AnyPositional = Annotated[PositionalSpec, POSITIONAL]
AnyStackBias = Annotated[StackBiasSpec, STACK_BIAS]
AnyScore = Annotated[ScoreSpec, SCORE]
AnyTextStep = Annotated[TextStepSpec, TEXT_STEP]
AnyTokenizer = Annotated[TokenizerSpec, TOKENIZER]
AnyUtility = Annotated[UtilitySpec, UTILITY]
AnyGraph = Annotated[GraphSpec, GRAPH]
AnySamplingFilter = Annotated[SamplingFilterSpec, SAMPLING_FILTER]
AnyStrategy = Annotated[StrategySpec, STRATEGY]


def slot_of(hint: Any) -> Slot | None:
    """The slot an annotation such as `AnySublayer` stands for, or None."""
    if typing.get_origin(hint) is Annotated:
        return next((m for m in typing.get_args(hint)[1:] if isinstance(m, Slot)), None)
    return None


def type_tag(cls: type[Spec], who: str = "aiayn.register") -> str:
    """The one value of a spec class's `type: Literal["..."]` field (`who` registers it, for the message)."""
    field = cls.model_fields.get("type")
    args = typing.get_args(field.annotation) if field is not None else ()
    if field is None or typing.get_origin(field.annotation) is not Literal or len(args) != 1 or not isinstance(args[0], str):
        raise PluginError(f'{who}: {cls.__name__} needs a field `type: Literal["its-name"]`, the key YAML selects it by')
    return args[0]

"""Encoder and decoder stacks: N layers, each an ordered list of sub-layers (Sec. 3.1)."""

from typing import Annotated

from pydantic import Field, model_validator

from aiayn.schemas._base import FieldError, PositiveInt, Spec
from aiayn.schemas.add_norm import AddNormSpec
from aiayn.schemas.slots import AnyStackBias, AnySublayer
from aiayn.schemas.sublayer import SublayerSpec

# a layer: its sub-layers in order, each any registered sub-layer type
LayerSpec = Annotated[list[AnySublayer], Field(min_length=1)]


class StackSpec(Spec):
    """`layer` is every layer's ordered sub-layers; `overrides` replaces chosen layers (by index)
    so a stack can mix layer kinds. Each sub-layer is wrapped in add & norm."""

    num_layers: PositiveInt
    layer: LayerSpec
    overrides: dict[int, LayerSpec] = {}
    add_norm: AddNormSpec = AddNormSpec.model_construct()  # unvalidated: a default must not load the blocks at import
    final_norm: bool | None = None  # None: a final norm (add_norm.norm) exactly when add_norm is pre-norm
    position_bias: AnyStackBias | None = None  # a score bias the stack's self-attentions share (none built in)

    @model_validator(mode="after")
    def _overrides_in_range(self) -> "StackSpec":
        for index in self.overrides:
            if not 0 <= index < self.num_layers:
                raise FieldError(
                    f"overrides.{index}",
                    f"layer index {index} is out of range for num_layers {self.num_layers}; "
                    f"use an index from 0 to {self.num_layers - 1}",
                )
        return self

    @property
    def layers(self) -> list[list[SublayerSpec]]:
        """The sub-layers of every layer, overrides applied."""
        return [self.overrides.get(i, self.layer) for i in range(self.num_layers)]

    @property
    def groups(self) -> list[tuple[str, list[SublayerSpec], int, int]]:
        """(where, sub-layers, how many layers, the first one's index) of each distinct declared
        layer: `layer` for every layer not overridden, then each override once. Sizes and costs
        sum over these, so a stack of any num_layers costs no time to count."""
        rest = self.num_layers - len(self.overrides)
        first = next((i for i in range(self.num_layers) if i not in self.overrides), 0)
        found = [("layer", self.layer, rest, first)] if rest else []
        return found + [(f"overrides.{i}", layer, 1, i) for i, layer in sorted(self.overrides.items())]

    @property
    def has_final_norm(self) -> bool:
        if self.final_norm is None:
            return self.add_norm.placement == "pre"
        return self.final_norm

    def located(self) -> list[tuple[str, SublayerSpec]]:
        """Every sub-layer with its YAML path relative to the stack, each declared one once."""
        found = [(f"layer[{j}]", s) for j, s in enumerate(self.layer)]
        for i, layer in sorted(self.overrides.items()):
            found += [(f"overrides.{i}[{j}]", s) for j, s in enumerate(layer)]
        return found

"""Several score biases on one stack: `position_bias: {type: sum, biases: [{type: alibi}, {type:
t5}]}` adds each one's (h or 1, T, S) to the scores of the stack's self-attentions. A sliding
window is a mask, not a bias: it joins any of these on its attention."""

from typing import Annotated, Literal

from pydantic import Field

from aiayn.schemas._base import FieldError
from aiayn.schemas.slots import AnyStackBias
from aiayn.schemas.stack_bias import StackBiasSpec


class SumBiasSpec(StackBiasSpec):
    type: Literal["sum"] = "sum"
    biases: Annotated[list[AnyStackBias], Field(min_length=2)]

    @property
    def switches(self) -> dict[str, str]:
        return {"position_bias": "+".join(str(b.switches.get("position_bias", b.type)) for b in self.biases)}

    def check_in(self, *, bidirectional: bool) -> None:
        for i, bias in enumerate(self.biases):
            try:
                bias.check_in(bidirectional=bidirectional)
            except FieldError as e:
                raise FieldError(f"biases[{i}].{e.path}", e.message) from None

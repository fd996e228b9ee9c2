"""The base every schema shares: unknown keys are errors, specs are immutable, numbers are finite."""

import re
import weakref
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

# A probability of dropping a unit: 1.0 would drop everything.
Probability = Annotated[float, Field(ge=0.0, lt=1.0)]
PositiveInt = Annotated[int, Field(gt=0)]
# A key of a dotlist override: dims.h, model.encoder.layer[0].h
DOTLIST_KEY = re.compile(r"^[A-Za-z_]\w*(\.\w+|\[\d+\])*$")


class Spec(BaseModel):
    """The base of every spec, a plugin's included. Validation schemas are built on first use
    (`defer_build`), so the open unions of schemas/slots.py hold every registered type by then."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        DEFINED.append(weakref.ref(cls))


# every Spec class in the order defined (schemas/slots.py rebuilds them in this order)
DEFINED: list[weakref.ref[type[Spec]]] = []


class FieldError(ValueError):
    """A cross-field error that belongs to a nested key of the model it is raised in.

    Pydantic reports a model validator's error at the model's own location; the CLI appends
    `path` so the user sees the exact key (`model.decoder.layer[0].type: ...`).
    """

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message

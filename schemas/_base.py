"""The base every schema shares: unknown keys are errors, specs are immutable, numbers are finite."""

import re
import types
import typing
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, model_validator

# A probability of dropping a unit: 1.0 would drop everything.
Probability = Annotated[float, Field(ge=0.0, lt=1.0)]
# A count or size: beyond int32 no tensor, step or loop can use it (a window of 1e30 overflows a mask).
PositiveInt = Annotated[int, Field(gt=0, le=2**31 - 1)]
# A random seed as Lightning's seed_everything takes it (numpy's range; outside it, a random seed is drawn).
Seed = Annotated[int, Field(ge=0, le=2**32 - 1)]
# float32's range, which the model computes in (bfloat16's too): the largest finite value, and the
# smallest normal one, below which a setting flushes to 0 or loses its precision
FLOAT32_MAX = 3.4028234663852886e38
FLOAT32_TINY = 1.1754943508222875e-38


def _float32(value: float) -> float:
    if value != 0 and not FLOAT32_TINY <= abs(value) <= FLOAT32_MAX:
        small = abs(value) < FLOAT32_TINY
        raise ValueError(
            f"{value!r} is too {'small' if small else 'large'} for float32, which the model computes in (it becomes "
            f"{'0 or loses its precision' if small else 'infinite'}); give a value between {FLOAT32_TINY:.2g} and "
            f"{FLOAT32_MAX:.2g} in magnitude"
        )
    return value


# A number the model computes with: a float that float32 holds (not 0, not infinite, where it was neither)
Float32 = Annotated[float, AfterValidator(_float32)]
PositiveFloat32 = Annotated[float, Field(gt=0.0), AfterValidator(_float32)]  # bounded before the check: JSON Schema's own bound
# A key of a dotlist override: dims.h, model.encoder.layer[0].h
DOTLIST_KEY = re.compile(r"^[A-Za-z_]\w*(\.\w+|\[\d+\])*$")


class Spec(BaseModel):
    """The base of every spec, a plugin's included. A spec validated against a registry
    (`model_validate(data, context=registry.context)`: the open unions of schemas/slots.py are its
    registered types) keeps it, for what is built from the spec (builder/registry.py `registry_of`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)
    _registry: Any = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _keep_registry(self, info: ValidationInfo) -> "Spec":
        registry = (info.context or {}).get("registry")
        if registry is not None:
            self._registry = registry
        return self

    def __eq__(self, other: object) -> bool:
        """Equal settings (the registry a spec was validated against is not one of them)."""
        if not isinstance(other, BaseModel):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((type(self), *self.__dict__.values()))

    def __getstate__(self) -> dict[Any, Any]:
        """Pickled without its registry (its functions stay in this process): validate it again there."""
        state = super().__getstate__()
        private = state.get("__pydantic_private__")
        if private:
            state["__pydantic_private__"] = {**private, "_registry": None}
        return state

    @model_validator(mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, data: Any) -> Any:
        """Pydantic's lax mode reads true as 1 for a number: `window: true` or `dims.N=true` would
        be a count of 1. A number field that admits no boolean refuses one (also in a list of them)."""
        if not isinstance(data, dict):
            return data
        for key, value in data.items():
            field = cls.model_fields.get(key) if isinstance(key, str) else None
            if field is None:
                continue
            for item in value if isinstance(value, (list, tuple)) else [value]:
                kind = _number_not_bool(field.annotation, nested=item is not value) if isinstance(item, bool) else None
                if kind:
                    raise FieldError(key, f"expected {kind}, got the boolean {str(item).lower()}")
        return data


class FieldError(ValueError):
    """A cross-field error that belongs to a nested key of the model it is raised in.

    Pydantic reports a model validator's error at the model's own location; the CLI appends
    `path` so the user sees the exact key (`model.decoder.layer[0].type: ...`).
    """

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def _number_not_bool(hint: Any, *, nested: bool) -> str | None:
    """ "an integer" or "a number" where `hint` admits an int or a float but no bool (at its top,
    or in its items where `nested`), else None."""
    leaves = _leaves(hint, nested)
    if bool in leaves or Any in leaves or not leaves & {int, float}:
        return None
    return "a number" if float in leaves else "an integer"


def _leaves(hint: Any, nested: bool) -> set[Any]:
    origin = typing.get_origin(hint)
    if origin is Annotated:
        return _leaves(typing.get_args(hint)[0], nested)
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_leaves(arg, nested) for arg in typing.get_args(hint)))
    if origin is typing.Literal:
        return {type(arg) for arg in typing.get_args(hint)}
    if origin in (list, tuple) and nested:
        return set().union(*(_leaves(arg, False) for arg in typing.get_args(hint) if arg is not Ellipsis))
    return {hint} if not nested else set()

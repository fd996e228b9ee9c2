"""The table of registrations: spec class -> what makes its part, and what it costs. A leaf that
every subsystem may read: builder/model builds blocks from it (registry.register fills it, with
the checks a block needs), builder/data makes text steps from it. It imports no torch."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from aiayn.builder.errors import UserError
from aiayn.schemas import slots
from aiayn.schemas._base import Spec

Flops = Callable[[Any, int, int], float]  # (spec, d_model, context length L) -> forward FLOPs per token
Activations = Callable[[Any, int], int]  # (spec, d_model) -> values per token kept for backward


@dataclass(frozen=True)
class Registration:
    spec: type[Spec]
    slot: str
    type: str  # the spec's `type` tag
    build: Callable[..., Any]  # (spec, ctx) -> its part: a module (BuildContext), a text step (the language)
    flops: Flops
    activations: Activations
    label: Callable[[Any], str]  # how `aiayn show` names the block
    load: Callable[[str, str], Any] | None = None  # a tokenizer type's: (the JSON it saved, where from) -> the tokenizer


_REGISTRY: dict[type[Spec], Registration] = {}


def add(entry: Registration) -> None:
    _REGISTRY[entry.spec] = entry


def unregister(spec: type[Spec]) -> None:
    """Take a registration back (tests that register a block of their own)."""
    entry = _REGISTRY.pop(spec, None)
    if entry is not None:
        slots.remove(entry.type)


def registration(spec: Spec | type[Spec]) -> Registration:
    """The registration of a spec (or spec class)."""
    slots.load()
    cls = spec if isinstance(spec, type) else type(spec)
    entry = _REGISTRY.get(cls)
    if entry is None:
        raise UserError(f"no block is registered for {cls.__name__}; register it with aiayn.register")
    return entry


def tokenizer_loader(kind: str) -> Registration | None:
    """The registration of the tokenizer type `kind` that reads its saved tokenizers back, if any is installed."""
    slots.load()
    return next((e for e in _REGISTRY.values() if e.slot == "tokenizer" and e.type == kind and e.load is not None), None)


@contextmanager
def scope() -> Iterator[None]:
    """Registrations made inside are taken back on leaving, however it is left: what a test
    registers is its own (tests/conftest.py wraps every test in one)."""
    kept, table = slots.saved(), dict(_REGISTRY)
    try:
        yield
    finally:
        _REGISTRY.clear()
        _REGISTRY.update(table)
        slots.restore(kept)

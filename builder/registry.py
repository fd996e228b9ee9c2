"""The registrations as one immutable value: `Registry`, which slot each registered spec class
fills, what makes its part and what it costs. Nothing here is global: a Registry is made where
the entry points are loaded (builder/plugins.py) or by a test from its own functions, and is
passed on: experiments are validated against one (`registry.context`), and the spec it validated
keeps it (`registry_of`) for the builder, the tokenizers and the text pipeline. A leaf that every
subsystem may read; it imports no torch."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from aiayn.builder.errors import UserError, described
from aiayn.schemas._base import Spec
from aiayn.schemas.slots import OWN, SLOTS, PluginError, type_tag

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
    owner: str = "aiayn.register"  # who registered it, for messages: "aiayn", "plugin 'x' (distribution d)"
    dist: str = ""  # the distribution that registered it, "name==version" (by hand: the class's top-level module)


@dataclass(frozen=True, eq=False)
class Registry:
    """Every registration, in the order made; immutable (`extended` makes another). `selection`:
    the plugin distributions it was loaded with (builder/plugins.py's load_registry); None for one
    extended in code. It is not sent to other processes: each loads its own."""

    entries: tuple[Registration, ...] = ()
    selection: str | None = None
    _by_class: dict[type[Spec], Registration] = field(default_factory=dict, repr=False, init=False)

    def __post_init__(self) -> None:
        self._by_class.update({entry.spec: entry for entry in self.entries})

    @property
    def context(self) -> dict[str, Any]:
        """What pydantic's validation takes: `ExperimentSpec.model_validate(data, context=registry.context)`."""
        return {"registry": self}

    def classes(self, slot: str) -> dict[str, type[Spec]]:
        """The classes registered for `slot`, by type tag, in registration order."""
        return {entry.type: entry.spec for entry in self.entries if entry.slot == slot}

    def registration(self, spec: Spec | type[Spec]) -> Registration:
        """The registration of a spec (or spec class)."""
        cls = spec if isinstance(spec, type) else type(spec)
        entry = self._by_class.get(cls)
        if entry is None:
            raise UserError(f"no block is registered for {cls.__name__}; register it with aiayn.register")
        return entry

    def tokenizer_loader(self, kind: str) -> Registration | None:
        """The registration of the tokenizer type `kind` that reads its saved tokenizers back, if any."""
        return next((e for e in self.entries if e.slot == "tokenizer" and e.type == kind and e.load is not None), None)

    def owner(self, tag: str) -> str:
        """The distribution that registered type `tag`, as "name==version" ("" where none did)."""
        return next((e.dist for e in self.entries if e.type == tag), "")

    def plugins_used(self, data: Any) -> dict[str, str]:
        """{type: "distribution==version"} of every registered type in `data` (a spec's JSON dump)
        that a plugin, not aiayn, registered: what a run records, so that where the plugin is
        missing the message can say which package to install."""
        tags = {e.type: e.dist for e in self.entries}
        found: dict[str, str] = {}
        stack = [data]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                tag = node.get("type")
                dist = tags.get(tag, "") if isinstance(tag, str) else ""
                if dist and dist.partition("==")[0] != OWN:
                    found[str(tag)] = dist
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
        return dict(sorted(found.items()))

    def missing_plugins(self, recorded: Any) -> dict[str, str]:
        """Of a run's recorded {type: distribution}, those whose type nothing here registers."""
        if not isinstance(recorded, dict):
            return {}
        known = {e.type for e in self.entries}
        return {tag: str(dist) for tag, dist in recorded.items() if tag not in known}

    def extended(self, register: Callable[[], None], *, owner: str = "aiayn.register", dist: str = "") -> Registry:
        """A new registry: this one's registrations and those `register()` makes by calling
        aiayn.register, as an entry point's function does (a PluginError takes none of them)."""
        if not callable(register):
            raise PluginError(f"Registry.extended: expected a function that calls aiayn.register, got {described(register)}")
        for name, value in (("owner", owner), ("dist", dist)):
            if not isinstance(value, str):
                raise PluginError(f"Registry.extended: {name} must be a str, got {described(value)}")
        made: list[Registration] = []
        token = _COLLECTING.set(_Collector(self, made, owner, dist))
        try:
            register()
        finally:
            _COLLECTING.reset(token)
        return Registry(self.entries + tuple(made), self.selection if not made else None)

    def __repr__(self) -> str:
        return f"Registry({len(self.entries)} types: {', '.join(e.type for e in self.entries)})"

    def __deepcopy__(self, memo: dict[int, Any]) -> Registry:
        return self  # immutable

    def __reduce__(self) -> Any:
        raise PluginError("a Registry is not sent to another process; load one there (aiayn.load_registry)")


@dataclass(frozen=True)
class _Collector:
    base: Registry
    made: list[Registration]
    owner: str
    dist: str


_COLLECTING: ContextVar[_Collector | None] = ContextVar("aiayn_registering", default=None)


def collect(slot: str, cls: type[Spec], make: Callable[[str, str, str], Registration]) -> None:
    """Takes one registration of `cls` into `slot` for the registry being made (`Registry.extended`);
    `make(tag, owner, dist)` builds it once the class is known to fit."""
    collector = _COLLECTING.get()
    if collector is None:
        raise PluginError(
            "aiayn.register is called by a plugin's registering function, while aiayn loads it (an aiayn.blocks entry "
            "point), or by Registry.extended(function); called by itself it registers nowhere"
        )
    who = collector.owner
    if not isinstance(slot, str) or slot not in SLOTS:
        raise PluginError(f"{who}: slot {slot!r} is not one of {', '.join(SLOTS)}")
    base = SLOTS[slot].base
    if not (isinstance(cls, type) and issubclass(cls, base)):
        name = getattr(cls, "__name__", repr(cls))
        raise PluginError(f"{who}: {name} must subclass aiayn.{base.__name__} to fill the {slot} slot")
    tag = type_tag(cls, who)
    taken = next((e for e in (*collector.base.entries, *collector.made) if e.type == tag), None)
    if taken is not None:
        raise PluginError(f"{who}: type {tag!r} is already registered by {taken.owner}; give {cls.__name__} another type name")
    owner = who if collector.dist else cls.__module__  # registered in code: its module
    collector.made.append(make(tag, owner, collector.dist or cls.__module__.partition(".")[0]))


def registry_of(spec: Spec) -> Registry:
    """The registry `spec` was validated against (`model_validate(..., context=registry.context)`)."""
    found = getattr(spec, "_registry", None)
    if not isinstance(found, Registry):
        raise UserError(
            f"{type(spec).__name__} was made without a registry: validate it with "
            "model_validate(data, context=registry.context) (aiayn.load_registry() gives one)"
        )
    return found

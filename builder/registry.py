"""The registrations as one immutable value: `Registry`, which slot each registered spec class
fills, what makes its part and what it costs. Nothing here is global: a Registry is made where
the entry points are loaded (builder/plugins.py) or by a test from its own functions, and is
passed on: experiments are validated against one (`registry.context`), and the spec it validated
keeps it (`registry_of`) for the builder, the tokenizers and the text pipeline. A leaf that every
subsystem may read; it imports no torch.

Registering is handing a function the registry being made: an entry point of group
`aiayn.blocks` names `def register(registry): registry.add(SpecClass, slot=..., build=...)`, and
`Registry.extended(function)` calls a function of that form the same way (fairseq2 hands its
container to an extension likewise). No module state: what a function adds goes to the
`RegistryBuilder` it was given, and the new Registry holds it."""

from __future__ import annotations

import inspect
from collections.abc import Callable
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
    owner: str = "Registry.extended"  # who registered it, for messages: "aiayn", "plugin 'x' (distribution d)"
    dist: str = ""  # the distribution that registered it, "name==version" (by hand: the class's top-level module)


@dataclass(frozen=True, eq=False)
class Registry:
    """Every registration, in the order made; immutable (`extended` makes another). It is not sent
    to other processes: each loads its own (`aiayn.load_registry`).

    :param entries: the registrations
    :param selection: the plugin distributions it was loaded with (builder/plugins.py's
        load_registry); None for one extended in code"""

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
        """The classes registered for `slot`, by type tag, in registration order.

        :param slot: a slot's name: sublayer, norm, positional, stack_bias, score, text_step, tokenizer, utility, graph,
            sampling_filter, strategy"""
        return {entry.type: entry.spec for entry in self.entries if entry.slot == slot}

    def registration(self, spec: Spec | type[Spec]) -> Registration:
        """The registration of a spec.

        :param spec: a spec, or a spec class
        :raises UserError: one nothing here registers"""
        cls = spec if isinstance(spec, type) else type(spec)
        entry = self._by_class.get(cls)
        if entry is None:
            raise UserError(f"no block is registered for {cls.__name__}; register it with registry.add (aiayn.RegistryBuilder)")
        return entry

    def tokenizer_loader(self, kind: str) -> Registration | None:
        """The registration of the tokenizer type that reads its saved tokenizers back, if any.

        :param kind: the tokenizer type's name"""
        return next((e for e in self.entries if e.slot == "tokenizer" and e.type == kind and e.load is not None), None)

    def owner(self, tag: str) -> str:
        """The distribution that registered a type, as "name==version" ("" where none did).

        :param tag: the type's name"""
        return next((e.dist for e in self.entries if e.type == tag), "")

    def plugins_used(self, data: Any) -> dict[str, str]:
        """{type: "distribution==version"} of every registered type in `data` that a plugin, not
        aiayn, registered: what a run records, so that where the plugin is missing the message can
        say which package to install.

        :param data: a spec's JSON dump"""
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
        """Of a run's recorded types, those nothing here registers.

        :param recorded: {type: distribution}, as a run's checkpoint records them (`plugins_used`)"""
        if not isinstance(recorded, dict):
            return {}
        known = {e.type for e in self.entries}
        return {tag: str(dist) for tag, dist in recorded.items() if tag not in known}

    def extended(
        self, register: Callable[[RegistryBuilder], None], *, owner: str = "Registry.extended", dist: str = ""
    ) -> Registry:
        """A new registry: this one's registrations and those `register(registry)` adds with
        `registry.add`, as an entry point's function does (a PluginError takes none of them).

        :param register: a function `register(registry)` (registry: a RegistryBuilder)
        :param owner: who registers, in messages ("plugin 'x' (distribution d)")
        :param dist: the distribution that registers, "name==version" (by hand: "", and each
            class's top-level module stands for it)"""
        if not callable(register):
            raise PluginError(
                f"Registry.extended: expected a function register(registry) that calls registry.add, got {described(register)}"
            )
        for name, value in (("owner", owner), ("dist", dist)):
            if not isinstance(value, str):
                raise PluginError(f"Registry.extended: {name} must be a str, got {described(value)}")
        check_registering_function(register, owner)
        builder = RegistryBuilder(self, owner, dist)
        register(builder)
        builder.closed = True  # a registry made is immutable: a kept builder adds to nothing
        return Registry(self.entries + tuple(builder.made), self.selection if not builder.made else None)

    def __repr__(self) -> str:
        return f"Registry({len(self.entries)} types: {', '.join(e.type for e in self.entries)})"

    def __deepcopy__(self, memo: dict[int, Any]) -> Registry:
        return self  # immutable

    def __reduce__(self) -> Any:
        raise PluginError("a Registry is not sent to another process; load one there (aiayn.load_registry)")


class RegistryBuilder:
    """The registry being made, as a registering function receives it: `add` registers one spec
    class. `Registry.extended` makes one; a plugin never does.

    :param base: the registry it extends (what is registered already)
    :param owner: who registers, in messages
    :param dist: the distribution that registers ("" by hand)"""

    def __init__(self, base: Registry, owner: str, dist: str) -> None:
        self.base, self.owner, self.dist = base, owner, dist
        self.made: list[Registration] = []
        self.closed = False

    def __repr__(self) -> str:
        return f"RegistryBuilder({self.owner}: {len(self.made)} added to {len(self.base.entries)})"

    def add(
        self,
        spec: type[Spec],
        *,
        slot: str,
        build: Callable[..., Any],
        flops: Flops | None = None,
        activations: Activations | None = None,
        label: Callable[[Any], str] | None = None,
        load: Callable[[str, str], Any] | None = None,
    ) -> None:
        """Register a spec class with the function that builds its part (a type registered twice is a PluginError).

        :param spec: a subclass of the slot's base (SublayerSpec, ..., StrategySpec: schemas/slots.py) with a `type` tag
        :param slot: where a YAML file may use it: sublayer, norm, positional, stack_bias, score, text_step, tokenizer, utility,
            graph, sampling_filter, strategy
        :param build: build(spec, ctx) -> its part: a sub-layer an aiayn.Sublayer (forward(x, ctx)), a norm a module mapping
            (..., d_model) to the same shape, positions forward(length, offset) -> (length, d_model), a stack bias
            forward(T, S) -> (h or 1, T, S), a score step an aiayn.ScoreStep; a text step's build(spec, lang) a function
            of a line; a tokenizer's build(spec, TokenizerInputs) its tokenizers; a utility's build(spec) a function
            (candidates, references) -> array of scores; a graph's build(spec) its aiayn.Graph (builder/graph.py); a
            sampling filter's build(spec) a function logits (n, V) -> logits, -inf where a token is removed; a
            strategy's build(spec) an aiayn.Strategy (builder/decode/strategy.py)
        :param flops: flops(spec, d_model, length): forward FLOPs per token (2 per multiply-add) with `length` tokens of
            context; a sub-layer's is required
        :param activations: activations(spec, d_model): values per token kept for backward; a sub-layer's is required
        :param label: label(spec): the part's name in `aiayn show` (default: its type)
        :param load: load(text, source), a tokenizer type's only: its tokenizer read back from the JSON its `to_json`
            wrote (`source` names the file in messages)"""
        name = getattr(spec, "__name__", spec)
        if self.closed:
            raise PluginError(f"{self.owner}: registry.add({name!r}) after its registering function returned adds to nothing")
        _check_functions(name, slot, build, flops, activations, label, load)
        tag = self._free_tag(spec, slot, name)
        owner = self.owner if self.dist else spec.__module__  # registered in code: its module
        self.made.append(
            Registration(
                spec=spec,
                slot=slot,
                type=tag,
                build=build,
                flops=flops or _none,
                activations=activations or _none,
                label=label or (lambda s: s.type),
                load=load,
                owner=owner,
                dist=self.dist or spec.__module__.partition(".")[0],
            )
        )

    def _free_tag(self, spec: type[Spec], slot: str, name: object) -> str:
        """The type tag `spec` registers under `slot`, where the class may fill it and no one has the tag."""
        who = self.owner
        if not isinstance(slot, str) or slot not in SLOTS:
            raise PluginError(f"{who}: slot {slot!r} is not one of {', '.join(SLOTS)}")
        base = SLOTS[slot].base
        if not (isinstance(spec, type) and issubclass(spec, base)):
            raise PluginError(f"{who}: {name} must subclass aiayn.{base.__name__} to fill the {slot} slot")
        tag = type_tag(spec, who)
        taken = next((e for e in (*self.base.entries, *self.made) if e.type == tag), None)
        if taken is not None:
            raise PluginError(
                f"{who}: type {tag!r} is already registered by {taken.owner}; give {spec.__name__} another type name"
            )
        return tag


def _check_functions(
    name: object, slot: object, build: object, flops: object, activations: object, label: object, load: object
) -> None:
    """What `RegistryBuilder.add` takes besides the class: functions where functions are due."""
    if not callable(build):
        raise PluginError(f"registry.add({name!r}): build must be a function (spec, ctx) -> nn.Module")
    for field_name, function in (("flops", flops), ("activations", activations), ("label", label)):
        if function is not None and not callable(function):
            raise PluginError(f"registry.add({name!r}): {field_name}= must be a function, got {described(function)}")
    if slot == "sublayer" and (flops is None or activations is None):
        raise PluginError(
            f"registry.add({name!r}, slot='sublayer'): give flops= and activations= "
            "(forward FLOPs per token and values per token kept for backward), which aiayn show and sweeps report"
        )
    if load is not None and (slot != "tokenizer" or not callable(load)):
        raise PluginError(f"registry.add({name!r}): load= is a tokenizer type's function (text, source) -> Tokenizer")


def check_registering_function(register: Callable[..., Any], owner: str) -> None:
    """A registering function takes the registry being made: `def register(registry)`; the form of
    aiayn 0.x, `def register()` calling aiayn.register, is told what to write instead."""
    try:
        inspect.signature(register).bind(None)
    except TypeError:
        name = getattr(register, "__qualname__", repr(register))
        raise PluginError(
            f"{owner}: {name}() takes no registry; a registering function receives the registry being made: "
            "def register(registry): registry.add(SpecClass, slot=..., build=...) (aiayn.register(...) inside it is gone)"
        ) from None
    except ValueError:  # a builtin without a signature: let the call say
        pass


def register(*args: Any, **kwargs: Any) -> None:
    """Deprecated (aiayn 0.x): registering wrote into a registry found through module state. A
    registering function now receives the registry: `def register(registry): registry.add(...)`."""
    raise PluginError(
        "aiayn.register(...) is replaced by the registry a registering function receives: write "
        "def register(registry): registry.add(SpecClass, slot=..., build=...) (an aiayn.blocks entry point, or "
        "Registry.extended(register)); registry.add takes the same arguments"
    )


def _none(*args: Any) -> int:
    return 0


def registry_of(spec: Spec) -> Registry:
    """The registry `spec` was validated against (`model_validate(..., context=registry.context)`)."""
    found = getattr(spec, "_registry", None)
    if not isinstance(found, Registry):
        raise UserError(
            f"{type(spec).__name__} was made without a registry: validate it with "
            "model_validate(data, context=registry.context) (aiayn.load_registry() gives one)"
        )
    return found

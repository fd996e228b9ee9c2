"""The open unions of the experiment format, and how they are filled.

A slot is a place in an experiment that a registered spec class fills: a sub-layer of a layer
(`sublayer`), the normaliser of add & norm (`norm`), the positions added to each side's
embeddings (`positional`), a score bias a stack shares among its layers (`stack_bias`), the step
from an attention's scores to its weights (`score`), a step of the text pipeline (`text_step`), the tokenizer (`tokenizer`), the
utility of minimum-Bayes-risk decoding (`utility`, chosen on the command line, not in YAML). A field
typed with a slot (`AnySublayer`, ...) validates as a union discriminated by `type` over the
classes registered for that slot when its schema is built (on first use: specs defer their
build); a later registration rebuilds the schemas that were built.

Classes are registered by `aiayn.register` (aiayn.builder.model.registry), from the functions
that the entry points of group `aiayn.blocks` name: aiayn's own blocks are one such entry point
(pyproject.toml), a plugin distribution's are others, so the built-in blocks register exactly as
a plugin does. `load()` calls them once, the first time a slot is read. A YAML file never names
code: only installed distributions register.
"""

from __future__ import annotations

import os
import re
import typing
from collections.abc import Iterable
from importlib.metadata import EntryPoint, entry_points
from typing import Annotated, Any, Literal

from pydantic import GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema

from aiayn.schemas._base import DEFINED, Spec
from aiayn.schemas.norm import NormSpec
from aiayn.schemas.positional import PositionalSpec
from aiayn.schemas.score import ScoreSpec
from aiayn.schemas.stack_bias import StackBiasSpec
from aiayn.schemas.sublayer import SublayerSpec
from aiayn.schemas.text_step import TextStepSpec
from aiayn.schemas.tokenizer import TokenizerSpec
from aiayn.schemas.utility import UtilitySpec

GROUP = "aiayn.blocks"
OWN = "aiayn"  # the distribution whose entry point registers the built-in blocks
# which plugin distributions load: unset, every one installed; a comma-separated list of
# distribution names, those alone; empty, none (aiayn's own blocks always load). The tests set it
# empty, so that what they expect does not depend on the plugins a machine has installed.
PLUGINS_ENV = "AIAYN_PLUGINS"


class PluginError(ValueError):
    """A plugin that cannot be loaded, or a registration that cannot be taken (one line)."""


class Slot:
    """A pydantic annotation: `Annotated[SublayerSpec, SUBLAYER]` validates as the union of the
    classes registered for the slot, discriminated by their `type`."""

    def __init__(self, name: str, base: type[Spec], what: str) -> None:
        self.name, self.base, self.what = name, base, what
        self.members: dict[str, type[Spec]] = {}  # type tag -> class, in registration order

    def classes(self) -> list[type[Spec]]:
        """The registered classes (aiayn's own and every installed plugin's)."""
        load()
        return list(self.members.values())

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        if not self.classes():  # aiayn registers a type of every slot
            raise PluginError(f"no {self.what} type is registered: is aiayn installed whole?")
        choices = {tag: handler.generate_schema(cls) for tag, cls in self.members.items()}
        return core_schema.tagged_union_schema(choices, discriminator="type")

    def __repr__(self) -> str:
        return f"Slot({self.name!r})"


SUBLAYER = Slot("sublayer", SublayerSpec, "sub-layer")
NORM = Slot("norm", NormSpec, "norm")
POSITIONAL = Slot("positional", PositionalSpec, "positional encoding")
STACK_BIAS = Slot("stack_bias", StackBiasSpec, "stack-level bias")
SCORE = Slot("score", ScoreSpec, "score step")
TEXT_STEP = Slot("text_step", TextStepSpec, "text pipeline step")
TOKENIZER = Slot("tokenizer", TokenizerSpec, "tokenizer")
UTILITY = Slot("utility", UtilitySpec, "MBR utility")
SLOTS = {slot.name: slot for slot in (SUBLAYER, NORM, POSITIONAL, STACK_BIAS, SCORE, TEXT_STEP, TOKENIZER, UTILITY)}

AnySublayer = Annotated[SublayerSpec, SUBLAYER]
AnyNorm = Annotated[NormSpec, NORM]
AnyPositional = Annotated[PositionalSpec, POSITIONAL]
AnyStackBias = Annotated[StackBiasSpec, STACK_BIAS]
AnyScore = Annotated[ScoreSpec, SCORE]
AnyTextStep = Annotated[TextStepSpec, TEXT_STEP]
AnyTokenizer = Annotated[TokenizerSpec, TOKENIZER]
AnyUtility = Annotated[UtilitySpec, UTILITY]

_owners: dict[str, str] = {}  # type tag -> who registered it
_dists: dict[str, str] = {}  # type tag -> the distribution that registered it, "name==version"
_registrant_dist: str | None = None
_state: Literal["empty", "loading", "loaded"] = "empty"
_registrant: str | None = None  # the entry point being loaded, for messages
_version = 0  # bumped by every registration, for caches of the unions


def slot_of(hint: Any) -> Slot | None:
    """The slot an annotation such as `AnySublayer` stands for, or None."""
    if typing.get_origin(hint) is Annotated:
        return next((m for m in typing.get_args(hint)[1:] if isinstance(m, Slot)), None)
    return None


def type_tag(cls: type[Spec]) -> str:
    """The one value of a spec class's `type: Literal["..."]` field."""
    field = cls.model_fields.get("type")
    args = typing.get_args(field.annotation) if field is not None else ()
    if field is None or typing.get_origin(field.annotation) is not Literal or len(args) != 1 or not isinstance(args[0], str):
        raise PluginError(f'{_who()}: {cls.__name__} needs a field `type: Literal["its-name"]`, the key YAML selects it by')
    return args[0]


def version() -> int:
    return _version


def add(slot: str, cls: type[Spec]) -> str:
    """Put `cls` into `slot` (after aiayn's own blocks and the installed plugins); its type tag."""
    load()
    global _version
    if slot not in SLOTS:
        raise PluginError(f"{_who()}: slot {slot!r} is not one of {', '.join(SLOTS)}")
    target = SLOTS[slot]
    if not (isinstance(cls, type) and issubclass(cls, target.base)):
        name = getattr(cls, "__name__", repr(cls))
        raise PluginError(f"{_who()}: {name} must subclass aiayn.{target.base.__name__} to fill the {slot} slot")
    tag = type_tag(cls)
    if tag in _owners:
        raise PluginError(
            f"{_who()}: type {tag!r} is already registered by {_owners[tag]}; give {cls.__name__} another type name"
        )
    target.members[tag] = cls
    _owners[tag] = _registrant or cls.__module__
    _dists[tag] = _registrant_dist or cls.__module__.partition(".")[0]
    _version += 1
    if _state == "loaded":
        _rebuild()
    return tag


def remove(tag: str) -> None:
    """Take a registration back (tests that register a block of their own)."""
    global _version
    for slot in SLOTS.values():
        slot.members.pop(tag, None)
    _owners.pop(tag, None)
    _dists.pop(tag, None)
    _version += 1
    _rebuild()


def saved() -> tuple[dict[str, dict[str, type[Spec]]], dict[str, str], dict[str, str]]:
    """The registrations as they stand (loaded first), for `restore`."""
    load()
    return {name: dict(slot.members) for name, slot in SLOTS.items()}, dict(_owners), dict(_dists)


def restore(state: tuple[dict[str, dict[str, type[Spec]]], dict[str, str], dict[str, str]]) -> None:
    """Put back the registrations `saved` returned: every one made since is taken back."""
    global _version
    members, owners, dists = state
    if all(SLOTS[name].members == kept for name, kept in members.items()):
        return
    for name, kept in members.items():
        SLOTS[name].members.clear()
        SLOTS[name].members.update(kept)
    _owners.clear()
    _owners.update(owners)
    _dists.clear()
    _dists.update(dists)
    _version += 1
    _rebuild()


def load() -> None:
    """Register aiayn's own blocks and every installed plugin's, once. A failure registers
    nothing and raises a PluginError naming the distribution."""
    global _state
    if _state != "empty":
        return  # "loading": a registration reads its slot while its plugin is being loaded
    _state = "loading"
    try:
        found = _selected(_ordered(entry_points(group=GROUP)))
        if not any(_distribution(ep) == OWN for ep in found):
            raise PluginError(
                f"aiayn's own blocks are not registered: its entry point in group {GROUP} is missing, so this "
                "aiayn was not installed; install it (pip install -e . in its repository)"
            )
        for ep in found:
            _register_from(ep)
    except BaseException:
        for slot in SLOTS.values():
            slot.members.clear()
        _owners.clear()
        _dists.clear()
        _state = "empty"
        raise
    _state = "loaded"


def owner(tag: str) -> str:
    """The distribution that registered type `tag`, as "name==version" (a class registered by
    hand, outside an entry point: its top-level module)."""
    load()
    return _dists.get(tag, "")


def plugins_used(data: Any) -> dict[str, str]:
    """{type: "distribution==version"} of every registered type in `data` (a spec's JSON dump)
    that a plugin, not aiayn, registered: what a run records, so that where the plugin is missing
    the message can say which package to install."""
    load()
    found: dict[str, str] = {}
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            tag = node.get("type")
            if isinstance(tag, str) and any(tag in slot.members for slot in SLOTS.values()):
                dist = _dists.get(tag, "")
                if dist and dist.partition("==")[0] != OWN:
                    found[tag] = dist
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return dict(sorted(found.items()))


def missing_plugins(recorded: Any) -> dict[str, str]:
    """Of a run's recorded {type: distribution}, those whose type no installed distribution registers."""
    load()
    if not isinstance(recorded, dict):
        return {}
    return {tag: str(dist) for tag, dist in recorded.items() if not any(tag in slot.members for slot in SLOTS.values())}


def _register_from(ep: EntryPoint) -> None:
    global _registrant, _registrant_dist
    who = "aiayn" if _distribution(ep) == OWN else f"plugin {ep.name!r} (distribution {_distribution(ep)})"
    _registrant = who
    _registrant_dist = f"{ep.dist.name}=={ep.dist.version}" if ep.dist is not None else _distribution(ep)
    try:
        try:
            register = ep.load()
        except Exception as e:  # whatever a plugin's import raises
            raise PluginError(f"{who}: cannot import {ep.value}: {type(e).__name__}: {_first_line(e)}") from None
        if not callable(register):
            raise PluginError(
                f"{who}: {ep.value} is not a function; an {GROUP} entry point names a function that calls aiayn.register"
            )
        try:
            register()
        except PluginError:
            raise
        except Exception as e:
            raise PluginError(f"{who}: {ep.value}() failed: {type(e).__name__}: {_first_line(e)}") from None
    finally:
        _registrant = _registrant_dist = None


def _who() -> str:
    return _registrant or "aiayn.register"


def _distribution(ep: EntryPoint) -> str:
    return ep.dist.name if ep.dist is not None else ep.value.partition(":")[0]


def _ordered(found: Iterable[EntryPoint]) -> list[EntryPoint]:
    """aiayn's own first, then the plugins by distribution and name (a fixed order for messages)."""
    return sorted(found, key=lambda ep: (_distribution(ep) != OWN, _distribution(ep), ep.name))


def _selected(found: list[EntryPoint]) -> list[EntryPoint]:
    """aiayn's own entry point and those of the plugins $AIAYN_PLUGINS names (all where unset)."""
    chosen = os.environ.get(PLUGINS_ENV)
    if chosen is None:
        return found
    names = {_normalized(name) for name in chosen.split(",") if name.strip()}
    return [ep for ep in found if _distribution(ep) == OWN or _normalized(_distribution(ep)) in names]


def _normalized(name: str) -> str:
    """A distribution's name as PEP 503 compares names (Aiayn_Example.plugin = aiayn-example-plugin)."""
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else "(no message)"


def _rebuild() -> None:
    """Rebuild every spec schema already built, in the order the classes were defined (a class
    can hold only classes defined before it), so each picks up its slots' new members."""
    for ref in list(DEFINED):
        cls = ref()
        if cls is not None and cls.__pydantic_complete__:
            cls.model_rebuild(force=True)

"""Where the registrations are made: the functions named by the entry points of group
`aiayn.blocks`, called in a fixed order, each given the registry being made (`def
register(registry): registry.add(...)`), their additions making one Registry.
aiayn's own blocks are one such entry point (pyproject.toml), a plugin distribution's are others,
so the built-in blocks register exactly as a plugin does. A YAML file never names code: only
installed distributions register.

The top of the program loads a registry once (the CLI's `main`, the Python API's functions) and
passes it on; `default_registry()` keeps the one loaded for each plugin selection, so that a
process loads the entry points once."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from importlib.metadata import EntryPoint, entry_points

from aiayn.builder.registry import Registry, RegistryBuilder, check_registering_function
from aiayn.schemas.slots import OWN, PluginError

GROUP = "aiayn.blocks"
# which plugin distributions load: unset, every one installed; a comma-separated list of
# distribution names, those alone; empty, none (aiayn's own blocks always load). The tests set it
# empty, so that what they expect does not depend on the plugins a machine has installed.
PLUGINS_ENV = "AIAYN_PLUGINS"


def default_registry() -> Registry:
    """aiayn's own blocks and the plugins $AIAYN_PLUGINS selects (all installed where unset),
    loaded once a process for each selection."""
    return load_registry(os.environ.get(PLUGINS_ENV))


@functools.cache
def load_registry(selection: str | None = None) -> Registry:
    """aiayn's own blocks and the plugins `selection` names, loaded once a process for each selection.

    :param selection: comma-separated distribution names (None: every one installed; "": none)
    :returns: the Registry
    :raises PluginError: a plugin that fails to load, naming its distribution (nothing is registered)"""
    found = _selected(_ordered(entry_points(group=GROUP)), selection)
    if not any(_distribution(ep) == OWN for ep in found):
        raise PluginError(
            f"aiayn's own blocks are not registered: its entry point in group {GROUP} is missing, so this "
            "aiayn was not installed; install it (pip install -e . in its repository)"
        )
    registry = Registry()
    for ep in found:
        registry = _register_from(ep, registry)
    for slot, tag, entry in (("graph", "encoder_decoder", "aiayn-graphs"), ("strategy", "beam", "aiayn-strategies")):
        if tag not in registry.classes(slot):
            raise PluginError(
                f"aiayn's {slot} types are not registered: its entry point {entry} in group {GROUP} is missing, so this "
                "aiayn was installed before it; install it again (pip install -e . in its repository)"
            )
    return Registry(registry.entries, selection)


def _register_from(ep: EntryPoint, registry: Registry) -> Registry:
    who = "aiayn" if _distribution(ep) == OWN else f"plugin {ep.name!r} (distribution {_distribution(ep)})"
    dist = f"{ep.dist.name}=={ep.dist.version}" if ep.dist is not None else _distribution(ep)
    try:
        register = ep.load()
    except Exception as e:  # whatever a plugin's import raises
        raise PluginError(f"{who}: cannot import {ep.value}: {type(e).__name__}: {_first_line(e)}") from None
    if not callable(register):
        raise PluginError(
            f"{who}: {ep.value} is not a function; an {GROUP} entry point names a function register(registry) that calls "
            "registry.add"
        )
    check_registering_function(register, who)

    def call(builder: RegistryBuilder) -> None:
        try:
            register(builder)
        except PluginError:
            raise
        except Exception as e:
            raise PluginError(f"{who}: {ep.value}() failed: {type(e).__name__}: {_first_line(e)}") from None

    return registry.extended(call, owner=who, dist=dist)


def _distribution(ep: EntryPoint) -> str:
    return ep.dist.name if ep.dist is not None else ep.value.partition(":")[0]


def _ordered(found: Iterable[EntryPoint]) -> list[EntryPoint]:
    """aiayn's own first, then the plugins by distribution and name (a fixed order for messages)."""
    return sorted(found, key=lambda ep: (_distribution(ep) != OWN, _distribution(ep), ep.name))


def _selected(found: list[EntryPoint], chosen: str | None) -> list[EntryPoint]:
    """aiayn's own entry point and those of the plugins `chosen` names (all where None)."""
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

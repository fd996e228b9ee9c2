"""Command-line overrides (KEY=VALUE, dotted keys, the value read as YAML) applied to a config:
a retyped node keeps only the keys its new kind has, as in a file; a mapping replaced by a list
is refused; every failure names the override and where it came from."""

import re
import typing
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from aiayn.builder.errors import UserError
from aiayn.builder.run.inherit import first_line, keep_fields_of
from aiayn.builder.run.nesting import yaml_nesting
from aiayn.schemas._base import DOTLIST_KEY
from aiayn.schemas.slots import Members


def apply_overrides(config: DictConfig, overrides: typing.Sequence[str], source: str, registry: Members) -> None:
    for item in overrides:
        key, sep, _ = item.partition("=")
        if not sep or not DOTLIST_KEY.match(key):
            raise UserError(f"override {item!r} is not KEY=VALUE with a dotted key, e.g. dims.h=16 or model.encoder.layer[0].h=4")
        if key == "extends":  # read with the file, before any override: setting it here would change nothing
            raise UserError(
                f"override {item!r} ({source}): extends is read from the file before the overrides apply; "
                "write `extends:` in the YAML, or give the parent experiment itself"
            )
        deep = yaml_nesting(item[len(key) + 1 :])
        if deep is not None:
            raise UserError(f"override {key}=... ({source}): {deep}")
        try:
            _check_indices(config, key, item, source)
            _check_override_shape(config, key, item, source)
            _retype(config, key, item, registry)
            config.merge_with_dotlist([item])
        except yaml.YAMLError as e:  # the value is YAML: *, &, !, %, @ and ` start other syntax there
            raise UserError(
                f"override {item!r} ({source}): {first_line(e)}: the value is read as YAML, where a string that starts "
                f"with * & ! % @ or ` needs quotes inside it, e.g. '{key}=\"*.weight\"' (or '{key}=[\"*\"]' for a list)"
            ) from None
        except OmegaConfBaseException as e:
            raise UserError(f"override {item!r} ({source}): {first_line(e)}") from None


def _check_indices(config: DictConfig, key: str, item: str, source: str) -> None:
    """An index past a list's end names the list and its indices (OmegaConf says "list index out of range")."""
    for match in re.finditer(r"\[(\d+)\]", key):
        where = key[: match.start()]
        node = OmegaConf.select(config, where, default=None, throw_on_resolution_failure=False)
        if isinstance(node, ListConfig) and int(match.group(1)) >= len(node):
            held = f"indices 0 to {len(node) - 1}" if len(node) else "no items"
            raise UserError(
                f"override {item!r} ({source}): {where} has {len(node)} items ({held}); set the whole list to grow it, e.g. {where}=[...]"
            )


def _check_override_shape(config: DictConfig, key: str, item: str, source: str) -> None:
    """A mapping replaced by a list (or the reverse) from the command line is a mistake."""
    old = OmegaConf.select(config, key, default=None, throw_on_resolution_failure=False)
    new = _override_value(key, item)
    if isinstance(old, DictConfig) and isinstance(new, list):
        raise UserError(
            f"override {item!r} ({source}): {key} is a mapping (key: value), not a list; set its keys, e.g. {key}.KEY=VALUE"
        )
    if isinstance(old, ListConfig) and isinstance(new, dict):
        raise UserError(f"override {item!r} ({source}): {key} is a list, not a mapping; give a list, e.g. {key}=[...]")


def _override_value(key: str, item: str) -> Any:
    """The value an override KEY=VALUE sets, parsed as OmegaConf parses it."""
    value = OmegaConf.to_container(OmegaConf.from_dotlist([item]))
    for part in re.findall(r"[^.\[\]]+", key):
        value = value[part] if isinstance(value, dict) and part in value else value
    return value


def _retype(config: DictConfig, key: str, item: str, registry: Members) -> None:
    """`model.positional.type=learned`, and `model.positional={type: learned, ...}` alike, change
    the node's kind, as a retyped node in a file does: the old kind's keys that the new one lacks go."""
    parent, _, leaf = key.rpartition(".")
    if leaf == "type" and parent:
        node = OmegaConf.select(config, parent, default=None, throw_on_resolution_failure=False)
        if isinstance(node, DictConfig) and "type" in node:
            keep_fields_of(node, item.partition("=")[2].strip(), registry)
        return
    new = _override_value(key, item)
    node = OmegaConf.select(config, key, default=None, throw_on_resolution_failure=False)
    if isinstance(new, dict) and "type" in new and isinstance(node, DictConfig) and "type" in node:
        keep_fields_of(node, new["type"], registry)

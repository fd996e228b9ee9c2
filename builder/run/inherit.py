"""Experiment files and what they extend: a YAML file read (or a UserError naming the file, the
line of a syntax error, the closest existing name), its `extends:` chain followed up to the root
(a cycle or a missing parent named), and each file merged onto its parent: a node whose `type`
changes keeps only the keys its new kind has, a mapping replaced by a list is refused."""

import difflib
import functools
import typing
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pydantic import BaseModel

from aiayn.builder.errors import UserError, resolved
from aiayn.builder.run.nesting import yaml_nesting
from aiayn.builder.run.validation import field_hint, union_args
from aiayn.schemas.experiment import ExperimentSpec
from aiayn.schemas.slots import Members


def read_yaml(path: Path, must_be: str = "an experiment must be a YAML mapping (key: value)") -> DictConfig:
    """A YAML mapping file, or a UserError naming the file (and line, for syntax errors)."""
    if not path.is_file():
        resolved(path)  # a link that leads back to itself is named as one
        what = "is a directory, not a YAML file" if path.is_dir() else "is not a file" if path.exists() else "does not exist"
        raise UserError(f"{path}: {what}{_near_file(path)}")
    try:
        deep = yaml_nesting(path.read_text(encoding="utf-8"))
        if deep is not None:
            raise UserError(f"{path}: {deep}")
        node = OmegaConf.load(path)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(e, "problem", None) or str(e)
        raise UserError(f"{where}: YAML syntax error: {problem}") from None
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", None)
        raise UserError(f"{path}: {key + ': ' if key else ''}{first_line(e)}") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text (byte {e.start}): {e.reason}") from None
    if not isinstance(node, DictConfig):
        raise UserError(f"{path}: {must_be}, got a list")
    return node


def _near_file(path: Path) -> str:
    key, equals, _ = str(path).partition("=")
    if equals and "/" not in key and not path.exists():  # `aiayn train trainer.max_steps=3`: the experiment left out
        return "; it reads as an override (KEY=VALUE): give the experiment's YAML first (EXP KEY=VALUE ...)"
    if not path.parent.is_dir():
        return ""
    names = [p.name for p in path.parent.iterdir() if p.suffix in (".yaml", ".yml")]
    close = difflib.get_close_matches(path.name, names, n=1, cutoff=0.6)
    return f"; did you mean {path.parent / close[0]}?" if close else ""


def _missing_parent(child: Path, parent: Path) -> str:
    """What `extends` tried (the absolute path: it is relative to the file that names it) and the
    YAML files that exist there, the closest first; never the file itself."""
    folder = resolved(parent.parent)
    tried = f"{child}: extends: {resolved(parent)} does not exist (extends is relative to the file that names it)"
    if not folder.is_dir():
        return f"{tried}; {folder} is not a folder"
    names = sorted(
        p.name for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file() and resolved(p) != resolved(child)
    )
    close = difflib.get_close_matches(parent.name, names, n=1, cutoff=0.6)
    if close:
        return f"{tried}; did you mean {folder / close[0]}?"
    if names:
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        return f"{tried}; YAML files in {folder}: {shown}"
    return f"{tried}; {folder} has no other YAML file"


def extends_chain(path: Path) -> list[tuple[Path, dict[str, Any]]]:
    """[(file, its unresolved mapping)] from `path` up to the root it extends."""
    chain: list[tuple[Path, dict[str, Any]]] = []
    seen: list[Path] = []
    while True:
        real = resolved(path)
        if real in seen:
            cycle = " -> ".join(str(p) for p in [*seen[seen.index(real) :], real])
            raise UserError(f"{chain[0][0]}: inheritance cycle in 'extends': {cycle}")
        seen.append(real)
        if chain and not path.is_file():
            raise UserError(_missing_parent(chain[-1][0], path))
        node = typing.cast(dict[str, Any], OmegaConf.to_container(read_yaml(path)))
        chain.append((path, node))
        parent = node.get("extends")
        if parent is None:
            return chain
        if not isinstance(parent, str):
            raise UserError(f"{path}: extends must be a path to a YAML file, got {parent!r}")
        path = path.parent / parent


def merge_onto(base: dict[str, Any], child: dict[str, Any], file: Path, registry: Members) -> dict[str, Any]:
    _check_shapes(base, child, file, "")
    _drop_retyped(base, child, registry)
    try:
        merged = OmegaConf.merge(OmegaConf.create(base), OmegaConf.create(child))
    except OmegaConfBaseException as e:
        raise UserError(f"{file}: cannot merge onto the file it extends: {first_line(e)}") from None
    return typing.cast(dict[str, Any], OmegaConf.to_container(merged))


def _check_shapes(base: Any, child: Any, file: Path, where: str) -> None:
    """A mapping replaced by a list (or the reverse) is a mistake, not a merge."""
    if not isinstance(base, dict) or not isinstance(child, dict):
        return
    for key, value in child.items():
        old, path = base.get(key), f"{where}.{key}".lstrip(".")
        for shape, other in ((dict, list), (list, dict)):
            if isinstance(old, shape) and isinstance(value, other):
                raise UserError(
                    f"{file}: {path} is a {_kind(value)}, but the file it extends has a {_kind(old)} there; "
                    f"write {path} as a {_kind(old)}"
                )
        _check_shapes(old, value, file, path)


def _kind(value: Any) -> str:
    return "mapping (key: value)" if isinstance(value, dict) else "list"


def _drop_retyped(base: dict[str, Any], child: dict[str, Any], registry: Members) -> None:
    """A node whose `type` the child changes is a different kind, not a diff of the old one:
    drop the parent's keys that the new kind does not have (e.g. a sinusoidal `layout` when
    positions become learned), keep the ones it shares (h, d_k, d_v between attentions)."""
    for key, new in child.items():
        old = base.get(key)
        if not isinstance(old, dict) or not isinstance(new, dict):
            continue
        if "type" in new and "type" in old:
            keep_fields_of(old, new["type"], registry)
        _drop_retyped(old, new, registry)


def keep_fields_of(node: dict[str, Any] | DictConfig, new_type: Any, registry: Members) -> None:
    if node["type"] == new_type:
        return
    fields = _fields_by_tag(typing.cast(typing.Hashable, registry)).get(new_type)
    for key in [str(k) for k in node.keys()]:
        if fields is None or key not in fields:
            node.pop(key)


@functools.lru_cache(maxsize=16)
def _fields_by_tag(registry: Any) -> dict[str, set[str]]:  # a Members, hashable
    """type tag -> the keys its schema accepts, for every tagged schema an experiment can hold
    with `registry`'s types (plugins' too)."""
    found: dict[str, set[str]] = {}
    todo: list[Any] = [ExperimentSpec]
    seen: set[Any] = set()
    while todo:
        hint = todo.pop()
        for arg in union_args(hint, registry):
            for inner in typing.get_args(arg) if typing.get_origin(arg) in (list, dict) else ():
                todo.append(inner)
            if isinstance(arg, type) and issubclass(arg, BaseModel) and arg not in seen:
                seen.add(arg)
                tag = arg.model_fields.get("type")
                if tag is not None and len(typing.get_args(tag.annotation)) == 1:
                    found[typing.get_args(tag.annotation)[0]] = set(arg.model_fields)
                todo += [field_hint(f) for f in arg.model_fields.values()]
    return found


def first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__

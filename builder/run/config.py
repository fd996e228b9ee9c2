"""YAML -> validated ExperimentSpec: inheritance (`extends:`), dotlist overrides, `${...}`.

Every failure a user can cause becomes a UserError whose message names the file, the YAML path
or the command-line override it came from; the CLI prints it and exits 2.
"""

import difflib
import functools
import hashlib
import json
import re
import typing
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pydantic import BaseModel, ValidationError

from aiayn.builder.errors import UserError, path_argument, resolved, strings_argument
from aiayn.builder.run.validation import field_hint, format_validation_error, union_args
from aiayn.schemas import slots
from aiayn.schemas._base import DOTLIST_KEY
from aiayn.schemas.experiment import ExperimentSpec

_INTERPOLATION = re.compile(r"^\$\{([^${}]+)\}$")  # a value that is exactly one ${key}


ModelOf = typing.Callable[[str], dict[str, Any]]  # a trained model's path -> its experiment's model section


def load_config(
    path: str | Path,
    overrides: typing.Sequence[str] = (),
    *,
    source: str = "on the command line",
    model_of: ModelOf | None = None,
) -> DictConfig:
    """The merged, overridden, still-unresolved config of `path` and the files it extends;
    `source` says where the overrides come from, in messages. An experiment with an init_from and
    no model section takes its source's model, read by `model_of` (builder/decode/checkpoint.py's
    source_model), and the overrides of model.* apply to it."""
    chain = _extends_chain(Path(path))
    merged: dict[str, Any] = {}
    for file, node in reversed(chain):
        merged = _merge(merged, node, file)
    merged.pop("extends", None)
    config = OmegaConf.create(merged)
    later = [item for item in overrides if _top_key(item) == "model"] if "model" not in merged else []
    _apply_overrides(config, [item for item in overrides if item not in later], source)
    if "model" not in config and config.get("init_from") is not None and model_of is not None:  # the model is the source's
        config.model = model_of(_init_from_path(config, path))
        _apply_overrides(config, later, source)
    return config


def _init_from_path(config: DictConfig, path: str | Path) -> str:
    try:
        node = config.init_from
        given = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node
    except OmegaConfBaseException as e:
        raise UserError(f"{path}: init_from: {_interpolation_message(e, config)}") from None
    where = given.get("path") if isinstance(given, dict) else given
    if not isinstance(where, str) or not Path(where).exists():
        raise UserError(
            f"{path}: the model is init_from's (the experiment has no model section), and init_from: {where} does not "
            "exist; give a run directory, a .ckpt or a Hugging Face Marian folder"
        )
    return where


def _top_key(item: str) -> str:
    return re.split(r"[.\[=]", item, maxsplit=1)[0]


def parent_of(path: str | Path) -> Path | None:
    """The file `path` extends, if any."""
    chain = _extends_chain(Path(path))
    return chain[1][0] if len(chain) > 1 else None


def resolve(config: DictConfig, path: str | Path) -> dict[str, Any]:
    try:
        return OmegaConf.to_container(config, resolve=True)  # type: ignore[return-value]
    except OmegaConfBaseException as e:
        raise UserError(f"{path}: {_interpolation_message(e, config)}") from None


def load_experiment(
    path: str | Path,
    overrides: typing.Sequence[str] = (),
    *,
    source: str = "on the command line",
    model_of: ModelOf | None = None,
) -> ExperimentSpec:
    """The experiment YAML at `path` with `overrides` (KEY=VALUE strings, as `aiayn validate`
    takes them), resolved and validated: an ExperimentSpec, or a UserError listing every error
    by its YAML path (a wrong argument type: a UserError naming the argument)."""
    path = path_argument(path, "path")
    overrides = strings_argument(overrides, "overrides")
    config = load_config(path, overrides, source=source, model_of=model_of)
    return validate(resolve(config, path), path, raw=OmegaConf.to_container(config), overrides=overrides, source=source)


def validate(
    data: dict[str, Any],
    path: str | Path,
    *,
    raw: Any = None,
    overrides: typing.Sequence[str] = (),
    source: str = "on the command line",
) -> ExperimentSpec:
    """`data` as an ExperimentSpec, or a UserError listing every error by YAML path. With the
    unresolved config `raw`, a value copied by `${key}` from a key that is itself wrong is not
    reported again; a key set by an override names that override."""
    try:
        return ExperimentSpec.model_validate(data)
    except ValidationError as e:
        lines = _dedupe_interpolated(format_validation_error(e), raw)
        given = {item.partition("=")[0]: item for item in overrides}
        lines = [_blame_override(line, given, source) for line in lines]
        noun = "error" if len(lines) == 1 else "errors"
        body = "\n".join(f"  {line}" for line in lines)
        raise UserError(f"{path} is not a valid experiment ({len(lines)} {noun}):\n{body}") from None


def _dedupe_interpolated(lines: list[str], raw: Any) -> list[str]:
    if raw is None:
        return lines
    paths = {line.partition(": ")[0] for line in lines}
    kept = []
    for line in lines:
        source = _INTERPOLATION.match(str(_lookup(raw, line.partition(": ")[0])))
        if source is None or source.group(1) not in paths:
            kept.append(line)
    return kept


def _lookup(raw: Any, path: str) -> Any:
    """The unresolved value at a YAML path such as model.encoder.layer[0].h (None if absent)."""
    node = raw
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        try:
            node = node[int(part[1:-1])] if part.startswith("[") else node[part]
        except (KeyError, IndexError, TypeError, ValueError):
            return None
    return node


def _blame_override(line: str, given: dict[str, str], source: str) -> str:
    path = line.partition(": ")[0]
    key = next((k for k in (path, f"{path}.type") if k in given), None)  # a wrong type is reported at its node
    return f"{line} (set {source}: {given[key]})" if key else line


def read_yaml(path: Path, must_be: str = "an experiment must be a YAML mapping (key: value)") -> DictConfig:
    """A YAML mapping file, or a UserError naming the file (and line, for syntax errors)."""
    if not path.is_file():
        resolved(path)  # a link that leads back to itself is named as one
        what = "is a directory, not a YAML file" if path.is_dir() else "does not exist"
        raise UserError(f"{path}: {what}{_near_file(path)}")
    try:
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


def _extends_chain(path: Path) -> list[tuple[Path, dict[str, Any]]]:
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


def _merge(base: dict[str, Any], child: dict[str, Any], file: Path) -> dict[str, Any]:
    _check_shapes(base, child, file, "")
    _drop_retyped(base, child)
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


def _drop_retyped(base: dict[str, Any], child: dict[str, Any]) -> None:
    """A node whose `type` the child changes is a different kind, not a diff of the old one:
    drop the parent's keys that the new kind does not have (e.g. a sinusoidal `layout` when
    positions become learned), keep the ones it shares (h, d_k, d_v between attentions)."""
    for key, new in child.items():
        old = base.get(key)
        if not isinstance(old, dict) or not isinstance(new, dict):
            continue
        if "type" in new and "type" in old:
            _keep_fields_of(old, new["type"])
        _drop_retyped(old, new)


def _keep_fields_of(node: dict[str, Any] | DictConfig, new_type: Any) -> None:
    if node["type"] == new_type:
        return
    fields = _fields_by_tag(slots.version()).get(new_type)
    for key in [str(k) for k in node.keys()]:
        if fields is None or key not in fields:
            node.pop(key)


@functools.cache
def _fields_by_tag(version: int) -> dict[str, set[str]]:
    """type tag -> the keys its schema accepts, for every tagged schema an experiment can hold
    (plugins' too: `version` counts the registrations, so a new one is seen)."""
    found: dict[str, set[str]] = {}
    todo: list[Any] = [ExperimentSpec]
    seen: set[Any] = set()
    while todo:
        hint = todo.pop()
        for arg in union_args(hint):
            for inner in typing.get_args(arg) if typing.get_origin(arg) in (list, dict) else ():
                todo.append(inner)
            if isinstance(arg, type) and issubclass(arg, BaseModel) and arg not in seen:
                seen.add(arg)
                tag = arg.model_fields.get("type")
                if tag is not None and len(typing.get_args(tag.annotation)) == 1:
                    found[typing.get_args(tag.annotation)[0]] = set(arg.model_fields)
                todo += [field_hint(f) for f in arg.model_fields.values()]
    return found


def _apply_overrides(config: DictConfig, overrides: typing.Sequence[str], source: str) -> None:
    for item in overrides:
        key, sep, _ = item.partition("=")
        if not sep or not DOTLIST_KEY.match(key):
            raise UserError(f"override {item!r} is not KEY=VALUE with a dotted key, e.g. dims.h=16 or model.encoder.layer[0].h=4")
        try:
            _check_override_shape(config, key, item, source)
            _retype(config, key, item)
            config.merge_with_dotlist([item])
        except yaml.YAMLError as e:  # the value is YAML: *, &, !, %, @ and ` start other syntax there
            raise UserError(
                f"override {item!r} ({source}): {first_line(e)}: the value is read as YAML, where a string that starts "
                f"with * & ! % @ or ` needs quotes inside it, e.g. '{key}=\"*.weight\"' (or '{key}=[\"*\"]' for a list)"
            ) from None
        except OmegaConfBaseException as e:
            raise UserError(f"override {item!r} ({source}): {first_line(e)}") from None


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


def _retype(config: DictConfig, key: str, item: str) -> None:
    """`model.positional.type=learned`, and `model.positional={type: learned, ...}` alike, change
    the node's kind, as a retyped node in a file does: the old kind's keys that the new one lacks go."""
    parent, _, leaf = key.rpartition(".")
    if leaf == "type" and parent:
        node = OmegaConf.select(config, parent, default=None, throw_on_resolution_failure=False)
        if isinstance(node, DictConfig) and "type" in node:
            _keep_fields_of(node, item.partition("=")[2].strip())
        return
    new = _override_value(key, item)
    node = OmegaConf.select(config, key, default=None, throw_on_resolution_failure=False)
    if isinstance(new, dict) and "type" in new and isinstance(node, DictConfig) and "type" in node:
        _keep_fields_of(node, new["type"])


def first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _interpolation_message(e: OmegaConfBaseException, config: DictConfig) -> str:
    key = getattr(e, "full_key", None) or _unresolvable_key(config) or "?"
    text = first_line(e)
    missing = re.search(r"Interpolation key '([^']+)' not found", text)
    if missing:
        ref = missing.group(1)
        hint = _suggest_key(ref, config)
        return f"{key}: ${{{ref}}} refers to a key that does not exist{hint}"
    return f"{key}: cannot resolve interpolation: {text}"


def _unresolvable_key(config: Any, where: str = "") -> str | None:
    """The first key whose value does not resolve (OmegaConf does not always say which)."""
    items = config.items_ex(resolve=False) if isinstance(config, DictConfig) else enumerate(config)
    for key, _ in items:
        name = str(key)
        path = f"{where}[{name}]" if isinstance(config, ListConfig) else f"{where}.{name}".lstrip(".")
        try:
            value = config[key]
        except OmegaConfBaseException:
            return path
        if isinstance(value, (DictConfig, ListConfig)):
            found = _unresolvable_key(value, path)
            if found:
                return found
    return None


def _suggest_key(ref: str, config: DictConfig) -> str:
    parent, _, leaf = ref.rpartition(".")
    node = OmegaConf.select(config, parent, default=None) if parent else config
    if isinstance(node, DictConfig):
        close = difflib.get_close_matches(leaf, [str(k) for k in node.keys()], n=1)
        if close:
            return f"; did you mean {'${'}{parent + '.' if parent else ''}{close[0]}}}?"
    return ""


def config_hash(spec: ExperimentSpec) -> str:
    """Two experiments alike once resolved and validated share this (a sweep's trials; init_from's source)."""
    text = json.dumps(spec.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_run_config(path: Path) -> dict[str, Any]:
    """A run's config.yaml as written (the resolved experiment of the release that trained it)."""
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError) as e:  # UnicodeDecodeError is a ValueError
        raise UserError(
            f"{path}: cannot read the run's config ({first_line(e)}); is it a run directory of aiayn train?"
        ) from None
    if not isinstance(config, dict):
        raise UserError(
            f"{path}: the run's config is not a mapping of settings (it holds {type(config).__name__}); is it a run directory of aiayn train?"
        )
    return config


def stored_spec(path: Path) -> ExperimentSpec | None:
    """The experiment a run's config.yaml records, read by this release (a field added since
    takes its default; a value the run wrote stays its own); None where it has none (or none valid)."""
    if not path.is_file():
        return None
    try:
        return ExperimentSpec.model_validate(read_run_config(path))
    except ValidationError:
        return None

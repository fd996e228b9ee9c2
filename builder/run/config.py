"""YAML -> validated ExperimentSpec: inheritance (`extends:`, inherit.py), dotlist overrides
(overrides.py), `${...}`, and a run's stored config read back.

Every failure a user can cause becomes a UserError whose message names the file, the YAML path
or the command-line override it came from; the CLI prints it and exits 2.
"""

import difflib
import hashlib
import json
import re
import typing
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pydantic import ValidationError

from aiayn.builder.errors import UserError, path_argument, strings_argument
from aiayn.builder.run.inherit import extends_chain, first_line, merge_onto
from aiayn.builder.run.nesting import yaml_nesting
from aiayn.builder.run.overrides import apply_overrides
from aiayn.builder.run.validation import format_validation_error
from aiayn.schemas.experiment import ExperimentSpec
from aiayn.schemas.slots import Members

_INTERPOLATION = re.compile(r"^\$\{([^${}]+)\}$")  # a value that is exactly one ${key}


ModelOf = typing.Callable[[str], dict[str, Any]]  # a trained model's path -> its experiment's model section


def load_config(
    path: str | Path,
    overrides: typing.Sequence[str] = (),
    *,
    registry: Members,
    source: str = "on the command line",
    model_of: ModelOf | None = None,
) -> DictConfig:
    """The merged, overridden, still-unresolved config of `path` and the files it extends;
    `source` says where the overrides come from, in messages. An experiment with an init_from and
    no model section takes its source's model, read by `model_of` (builder/decode/checkpoint.py's
    source_model), and the overrides of model.* apply to it."""
    chain = extends_chain(Path(path))
    merged: dict[str, Any] = {}
    for file, node in reversed(chain):
        merged = merge_onto(merged, node, file, registry)
    merged.pop("extends", None)
    config = OmegaConf.create(merged)
    later = [item for item in overrides if _top_key(item) == "model"] if "model" not in merged else []
    apply_overrides(config, [item for item in overrides if item not in later], source, registry)
    if "model" not in config and config.get("init_from") is not None and model_of is not None:  # the model is the source's
        config.model = model_of(_init_from_path(config, path))
        apply_overrides(config, later, source, registry)
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
            "exist; give a run directory, a .ckpt or a Hugging Face folder (Marian, GPT-2, Llama)"
        )
    return where


def _top_key(item: str) -> str:
    return re.split(r"[.\[=]", item, maxsplit=1)[0]


def parent_of(path: str | Path) -> Path | None:
    """The file `path` extends, if any."""
    chain = extends_chain(Path(path))
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
    registry: Members,
    source: str = "on the command line",
    model_of: ModelOf | None = None,
) -> ExperimentSpec:
    """The experiment YAML at `path` with `overrides` (KEY=VALUE strings, as `aiayn validate`
    takes them), resolved and validated against `registry`: an ExperimentSpec, or a UserError
    listing every error by its YAML path (a wrong argument type: a UserError naming the argument)."""
    path = path_argument(path, "path")
    overrides = strings_argument(overrides, "overrides")
    config = load_config(path, overrides, registry=registry, source=source, model_of=model_of)
    return validate(resolve(config, path), path, registry, raw=OmegaConf.to_container(config), overrides=overrides, source=source)


def validate(
    data: dict[str, Any],
    path: str | Path,
    registry: Members,
    *,
    raw: Any = None,
    overrides: typing.Sequence[str] = (),
    source: str = "on the command line",
) -> ExperimentSpec:
    """`data` as an ExperimentSpec, or a UserError listing every error by YAML path. With the
    unresolved config `raw`, a value copied by `${key}` from a key that is itself wrong is not
    reported again; a key set by an override names that override."""
    try:
        return ExperimentSpec.model_validate(data, context={"registry": registry})
    except ValidationError as e:
        lines = _dedupe_interpolated(format_validation_error(e, registry=registry), raw)
        given = {item.partition("=")[0]: item for item in overrides}
        lines = [blame_override(line, given, source) for line in lines]
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


def blame_override(line: str, given: dict[str, str], source: str = "on the command line") -> str:
    """An error line `path: message`, with the override that set `path` (`given`: key -> override) named."""
    path = line.partition(": ")[0]
    key = next((k for k in (path, f"{path}.type") if k in given), None)  # a wrong type is reported at its node
    return f"{line} (set {source}: {given[key]})" if key else line


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
        text = path.read_text(encoding="utf-8")
        deep = yaml_nesting(text)
        config = yaml.safe_load(text) if deep is None else None
    except (OSError, ValueError, yaml.YAMLError) as e:  # UnicodeDecodeError is a ValueError
        raise UserError(
            f"{path}: cannot read the run's config ({first_line(e)}); is it a run directory of aiayn train?"
        ) from None
    if deep is not None:
        raise UserError(f"{path}: cannot read the run's config ({deep}); is it a run directory of aiayn train?")
    if not isinstance(config, dict):
        raise UserError(
            f"{path}: the run's config is not a mapping of settings (it holds {type(config).__name__}); is it a run directory of aiayn train?"
        )
    return config


def stored_spec(path: Path, registry: Members) -> ExperimentSpec | None:
    """The experiment a run's config.yaml records, read by this release (a field added since
    takes its default; a value the run wrote stays its own); None where it has none (or none valid)."""
    if not path.is_file():
        return None
    try:
        return ExperimentSpec.model_validate(read_run_config(path), context={"registry": registry})
    except ValidationError:
        return None

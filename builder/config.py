"""YAML -> validated ExperimentSpec: inheritance (`extends:`), dotlist overrides, `${...}`.

Every failure a user can cause becomes a UserError whose message names the file or the YAML
path; the CLI prints it and exits 2.
"""

import difflib
import functools
import re
import types
import typing
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pydantic import BaseModel, ValidationError

from builder.errors import UserError
from schemas._base import FieldError
from schemas.experiment import ExperimentSpec

_DOTLIST_KEY = re.compile(r"^[A-Za-z_][\w]*(\.[\w]+|\[\d+\])*$")


def load_config(path: str | Path, overrides: typing.Sequence[str] = ()) -> DictConfig:
    """The merged, overridden, still-unresolved config of `path` and the files it extends."""
    chain = _extends_chain(Path(path))
    config = OmegaConf.create({})
    for file, node in reversed(chain):
        config = _merge(config, node, file)
    config.pop("extends", None)
    _apply_overrides(config, overrides)
    return config


def parent_of(path: str | Path) -> Path | None:
    """The file `path` extends, if any."""
    chain = _extends_chain(Path(path))
    return chain[1][0] if len(chain) > 1 else None


def resolve(config: DictConfig, path: str | Path) -> dict[str, Any]:
    try:
        return OmegaConf.to_container(config, resolve=True)  # type: ignore[return-value]
    except OmegaConfBaseException as e:
        raise UserError(f"{path}: {_interpolation_message(e, config)}") from None


def load_experiment(path: str | Path, overrides: typing.Sequence[str] = ()) -> ExperimentSpec:
    config = load_config(path, overrides)
    return validate(resolve(config, path), path)


def validate(data: dict[str, Any], path: str | Path) -> ExperimentSpec:
    try:
        return ExperimentSpec.model_validate(data)
    except ValidationError as e:
        lines = [f"  {line}" for line in format_validation_error(e)]
        noun = "error" if len(lines) == 1 else "errors"
        raise UserError(f"{path} is not a valid experiment ({len(lines)} {noun}):\n" + "\n".join(lines)) from None


def read_yaml(path: Path, must_be: str = "an experiment must be a YAML mapping (key: value)") -> DictConfig:
    """A YAML mapping file, or a UserError naming the file (and line, for syntax errors)."""
    if not path.is_file():
        what = "is a directory, not a YAML file" if path.is_dir() else "does not exist"
        raise UserError(f"{path}: {what}")
    try:
        node = OmegaConf.load(path)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(e, "problem", None) or str(e)
        raise UserError(f"{where}: YAML syntax error: {problem}") from None
    except OmegaConfBaseException as e:
        raise UserError(f"{path}: {first_line(e)}") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text (byte {e.start}): {e.reason}") from None
    if not isinstance(node, DictConfig):
        raise UserError(f"{path}: {must_be}, got a list")
    return node


def _extends_chain(path: Path) -> list[tuple[Path, DictConfig]]:
    """[(file, its config)] from `path` up to the root it extends."""
    chain: list[tuple[Path, DictConfig]] = []
    seen: list[Path] = []
    while True:
        resolved = path.resolve()
        if resolved in seen:
            cycle = " -> ".join(str(p) for p in [*seen[seen.index(resolved):], resolved])
            raise UserError(f"{chain[0][0]}: inheritance cycle in 'extends': {cycle}")
        seen.append(resolved)
        node = read_yaml(path)
        chain.append((path, node))
        parent = node.get("extends")
        if parent is None:
            return chain
        if not isinstance(parent, str):
            raise UserError(f"{path}: extends must be a path to a YAML file, got {parent!r}")
        path = path.parent / parent


def _merge(base: DictConfig, child: DictConfig, file: Path) -> DictConfig:
    _drop_retyped(base, child)
    try:
        return typing.cast(DictConfig, OmegaConf.merge(base, child))
    except OmegaConfBaseException as e:
        raise UserError(f"{file}: cannot merge onto the file it extends: {first_line(e)}") from None


def _drop_retyped(base: DictConfig, child: DictConfig) -> None:
    """A node whose `type` the child changes is a different kind, not a diff of the old one:
    drop the parent's keys that the new kind does not have (e.g. a sinusoidal `layout` when
    positions become learned), keep the ones it shares (h, d_k, d_v between attentions)."""
    for key in child.keys():
        old, new = base._get_node(key) if key in base else None, child._get_node(key)
        if not isinstance(old, DictConfig) or not isinstance(new, DictConfig):
            continue
        if "type" in new and "type" in old:
            _keep_fields_of(old, new._get_node("type")._value())
        _drop_retyped(old, new)


def _keep_fields_of(node: DictConfig, new_type: Any) -> None:
    if node._get_node("type")._value() == new_type:
        return
    fields = _fields_by_tag().get(new_type)
    for key in list(node.keys()):
        if fields is None or key not in fields:
            node.pop(key)


@functools.cache
def _fields_by_tag() -> dict[str, set[str]]:
    """type tag -> the keys its schema accepts, for every tagged schema an experiment can hold."""
    found: dict[str, set[str]] = {}
    todo: list[Any] = [ExperimentSpec]
    seen: set[Any] = set()
    while todo:
        hint = todo.pop()
        for arg in _union_args(hint):
            for inner in typing.get_args(arg) if typing.get_origin(arg) in (list, dict) else ():
                todo.append(inner)
            if isinstance(arg, type) and issubclass(arg, BaseModel) and arg not in seen:
                seen.add(arg)
                tag = arg.model_fields.get("type")
                if tag is not None and len(typing.get_args(tag.annotation)) == 1:
                    found[typing.get_args(tag.annotation)[0]] = set(arg.model_fields)
                todo += [f.annotation for f in arg.model_fields.values()]
    return found


def _apply_overrides(config: DictConfig, overrides: typing.Sequence[str]) -> None:
    for item in overrides:
        key, sep, _ = item.partition("=")
        if not sep or not _DOTLIST_KEY.match(key):
            raise UserError(
                f"override {item!r} is not KEY=VALUE with a dotted key, e.g. dims.h=16 or "
                "model.encoder.layer[0].h=4"
            )
        try:
            _retype(config, key, item)
            config.merge_with_dotlist([item])
        except (OmegaConfBaseException, yaml.YAMLError) as e:
            raise UserError(f"override {item!r}: {first_line(e)}") from None


def _retype(config: DictConfig, key: str, item: str) -> None:
    """`model.positional.type=learned` changes the node's kind, as a retyped node in a file does."""
    parent, _, leaf = key.rpartition(".")
    if leaf != "type" or not parent:
        return
    node = OmegaConf.select(config, parent, default=None, throw_on_resolution_failure=False)
    if isinstance(node, DictConfig) and "type" in node:
        _keep_fields_of(node, item.partition("=")[2].strip())


def first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _interpolation_message(e: OmegaConfBaseException, config: DictConfig) -> str:
    key = getattr(e, "full_key", None) or "?"
    text = first_line(e)
    missing = re.search(r"Interpolation key '([^']+)' not found", text)
    if missing:
        ref = missing.group(1)
        hint = _suggest_key(ref, config)
        return f"{key}: ${{{ref}}} refers to a key that does not exist{hint}"
    return f"{key}: cannot resolve interpolation: {text}"


def _suggest_key(ref: str, config: DictConfig) -> str:
    parent, _, leaf = ref.rpartition(".")
    node = OmegaConf.select(config, parent, default=None) if parent else config
    if isinstance(node, DictConfig):
        close = difflib.get_close_matches(leaf, [str(k) for k in node.keys()], n=1)
        if close:
            return f"; did you mean {'${'}{parent + '.' if parent else ''}{close[0]}}}?"
    return ""


# ---- pydantic errors -> YAML paths -------------------------------------------------------


def format_validation_error(error: ValidationError, root: type[BaseModel] = ExperimentSpec) -> list[str]:
    """Pydantic's errors as `yaml.path: message` lines, for a document validated as `root`."""
    lines: list[str] = []
    union_choices: dict[str, list[str]] = {}  # path -> the members of a plain union it failed
    values: dict[str, Any] = {}
    for item in error.errors(include_url=False):
        path, holder, member = _yaml_path(item["loc"], root)
        ctx_error = (item.get("ctx") or {}).get("error")
        if isinstance(ctx_error, FieldError):
            path = ".".join(p for p in (path, ctx_error.path) if p).replace(".[", "[")
            lines.append(f"{path}: {ctx_error.message}")
        elif member is not None:
            if path not in union_choices:
                lines.append(path)  # filled in below, once every member is known
                union_choices[path], values[path] = [], item.get("input")
            union_choices[path].append(f"{member} ({_describe(item, holder).split(', got')[0]})")
        else:
            lines.append(f"{path or '(top level)'}: {_describe(item, holder)}")
    for i, line in enumerate(lines):
        if line in union_choices:
            lines[i] = f"{line}: {values[line]!r} is none of: " + "; ".join(union_choices[line])
    return lines


def _yaml_path(loc: tuple[Any, ...], root: type[BaseModel] = ExperimentSpec) -> tuple[str, type[BaseModel] | None, str | None]:
    """('model', 'encoder', 'layer', 0, 'self_attention', 'h') -> 'model.encoder.layer[0].h',
    the schema class holding the last key (for "did you mean"), and, when the value failed a
    plain union such as `int | str`, the member pydantic tried (its loc ends with it)."""
    parts: list[str] = []
    hint: Any = root
    holder: type[BaseModel] | None = None
    for part in loc:
        options = _models_in(hint)
        if isinstance(part, int) and not _is_mapping(hint):
            parts.append(f"[{part}]")
            hint = _item_type(hint)
            continue
        tagged = _by_tag(options, part)
        if tagged is not None:  # a discriminated union's tag: not a key in the YAML
            hint = tagged
            continue
        if not options and len(_union_args(hint)) > 1 and not _is_mapping(hint):
            return "".join(parts).lstrip("."), holder, str(part)
        model = next((m for m in options if str(part) in m.model_fields), options[0] if options else None)
        holder = model
        parts.append(f".{part}")
        if _is_mapping(hint):
            hint = _item_type(hint)
        elif model is not None and str(part) in model.model_fields:
            hint = model.model_fields[str(part)].annotation
        else:
            hint = None
    return "".join(parts).lstrip("."), holder, None


def _strip(hint: Any) -> Any:
    while typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    return hint


def _union_args(hint: Any) -> tuple[Any, ...]:
    hint = _strip(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return tuple(_strip(a) for a in typing.get_args(hint))
    return (hint,)


def _models_in(hint: Any) -> list[type[BaseModel]]:
    return [a for a in _union_args(hint) if isinstance(a, type) and issubclass(a, BaseModel)]


def _is_mapping(hint: Any) -> bool:
    return any(typing.get_origin(a) is dict for a in _union_args(hint))


def _item_type(hint: Any) -> Any:
    for a in _union_args(hint):
        if typing.get_origin(a) in (list, tuple, dict):
            return typing.get_args(a)[-1 if typing.get_origin(a) is dict else 0]
    return None


def _by_tag(models: list[type[BaseModel]], part: Any) -> type[BaseModel] | None:
    for m in models:
        field = m.model_fields.get("type")
        if field is not None and typing.get_args(field.annotation) == (part,):
            return m
    return None


# What fairseq, OpenNMT-py, tensor2tensor and PyTorch call our paper-named keys.
_ALIASES = {
    **dict.fromkeys(["heads", "num_heads", "n_heads", "nhead", "attention_heads"], "h"),
    **dict.fromkeys(["dim_feedforward", "ffn_dim", "ffn_embed_dim", "filter_size", "d_inner", "hidden_size"], "d_ff"),
    **dict.fromkeys(["embed_dim", "hidden_dim", "d_hidden", "dim", "model_dim"], "d_model"),
    **dict.fromkeys(["layers", "n_layers", "num_encoder_layers", "num_decoder_layers"], "num_layers"),
    **dict.fromkeys(["key_dim", "head_dim", "dk"], "d_k"),
    **dict.fromkeys(["value_dim", "dv"], "d_v"),
    **dict.fromkeys(["p_drop", "P_dropout", "dropout_rate"], "P_drop"),
    **dict.fromkeys(["label_smoothing", "ls", "eps"], "eps_ls"),
}


def _describe(item: dict[str, Any], holder: type[BaseModel] | None) -> str:
    kind, value = item["type"], item.get("input")
    if kind == "extra_forbidden":
        key = str(item["loc"][-1])
        known = list(holder.model_fields) if holder else []
        close = [_ALIASES[key]] if _ALIASES.get(key) in known else []
        close = close or difflib.get_close_matches(key, known, n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else f"; known keys: {', '.join(known)}"
        return f"unknown key{hint}"
    if kind == "missing":
        return "required key is missing"
    if kind == "union_tag_invalid":
        tags = re.findall(r"'(\w+)'", item["ctx"]["expected_tags"])
        close = difflib.get_close_matches(str(item["ctx"]["tag"]), tags, n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        return f"type {item['ctx']['tag']!r} is not one of {', '.join(tags)}{hint}"
    if kind == "union_tag_not_found":
        return "a 'type' key is required to say which kind this is"
    if kind == "value_error":
        return item["msg"].removeprefix("Value error, ")
    return f"{item['msg'][0].lower()}{item['msg'][1:]}, got {value!r}"

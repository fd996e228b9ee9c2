"""Pydantic's validation errors as YAML paths: `model.encoder.layer[0].h: ...`, with "did you mean"
for misspelled keys (including what other projects call our paper-named keys)."""

import difflib
import re
import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from aiayn.schemas._base import FieldError
from aiayn.schemas.experiment import ExperimentSpec
from aiayn.schemas.slots import Members, Slot, slot_of


def format_validation_error(
    error: ValidationError, root: type[BaseModel] = ExperimentSpec, *, registry: Members | None = None
) -> list[str]:
    """Pydantic's errors as `yaml.path: message` lines, for a document validated as `root` against
    `registry` (its slots' classes; a schema without slots needs none)."""
    lines: list[str] = []
    union_choices: dict[str, list[str]] = {}  # path -> the members of a plain union it failed
    values: dict[str, Any] = {}
    for item in error.errors(include_url=False):
        path, holder, member = _yaml_path(item["loc"], root, registry)
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


def _yaml_path(
    loc: tuple[Any, ...], root: type[BaseModel], registry: Members | None
) -> tuple[str, type[BaseModel] | None, str | None]:
    """('model', 'encoder', 'layer', 0, 'self_attention', 'h') -> 'model.encoder.layer[0].h',
    the schema class holding the last key (for "did you mean"), and, when the value failed a
    plain union such as `int | str`, the member pydantic tried (its loc ends with it)."""
    parts: list[str] = []
    hint: Any = root
    holder: type[BaseModel] | None = None
    for part in loc:
        options = _models_in(hint, registry)
        if isinstance(part, int) and not _is_mapping(hint, registry):
            parts.append(f"[{part}]")
            hint = _item_type(hint, registry)
            continue
        tagged = _by_tag(options, part)
        if tagged is not None:  # a discriminated union's tag: not a key in the YAML
            hint = tagged
            continue
        if not options and len(union_args(hint, registry)) > 1 and not _is_mapping(hint, registry):
            return "".join(parts).lstrip("."), holder, str(part)
        model = next((m for m in options if str(part) in m.model_fields), options[0] if options else None)
        holder = model
        parts.append(f".{part}")
        if _is_mapping(hint, registry):
            hint = _item_type(hint, registry)
        elif model is not None and str(part) in model.model_fields:
            hint = field_hint(model.model_fields[str(part)])
        else:
            hint = None
    return "".join(parts).lstrip("."), holder, None


def _strip(hint: Any) -> Any:
    while typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    return hint


def field_hint(field: FieldInfo) -> Any:
    """A field's annotation with the slot pydantic moved off it into its metadata
    (`norm: AnyNorm` has annotation NormSpec): Annotated[NormSpec, NORM] again."""
    slot = next((m for m in field.metadata if isinstance(m, Slot)), None)
    return field.annotation if slot is None else typing.Annotated[field.annotation, slot]


def union_args(hint: Any, registry: Members | None = None) -> tuple[Any, ...]:
    """The members of a union (a slot's classes in `registry` included), or (hint,)."""
    slot = slot_of(hint)
    if slot is not None:
        return tuple(slot.classes(registry)) if registry is not None else ()
    hint = _strip(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return tuple(m for a in typing.get_args(hint) for m in union_args(a, registry))
    return (hint,)


def _models_in(hint: Any, registry: Members | None) -> list[type[BaseModel]]:
    return [a for a in union_args(hint, registry) if isinstance(a, type) and issubclass(a, BaseModel)]


def _is_mapping(hint: Any, registry: Members | None) -> bool:
    return any(typing.get_origin(a) is dict for a in union_args(hint, registry))


def _item_type(hint: Any, registry: Members | None) -> Any:
    for a in union_args(hint, registry):
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


def _describe(item: Mapping[str, Any], holder: type[BaseModel] | None) -> str:
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
    if kind in ("tuple_type", "list_type"):  # YAML and overrides write a sequence as a list: [1, 2]
        return f"input should be a list, got {value!r}"
    return f"{item['msg'][0].lower()}{item['msg'][1:]}, got {value!r}"

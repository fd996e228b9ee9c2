"""Which settings a results table shows beside Table 3's columns: the switches of the variants
after 2017 (norm, ffn, kv_heads, rotary, position_bias, a plugin's), then a column for each other
setting of the runs' config.yaml in which the rows differ (post- and pre-norm, say), but for what
a shown column already tells apart."""

import json
import re
from typing import Any

from aiayn.builder.sweep.rows import COLUMNS, SWITCHES, Row
from aiayn.builder.sweep.search_notes import short

# What a row shows already, or what tells its trials apart rather than its variant
_SHOWN = re.compile(
    r"^(name|description|reported\..*|train\.seed|dims\..*|trainer\.max_steps|train\.label_smoothing|model\.positional\.type"
    r"|.*\.(h|d_k|d_v|d_ff|d_model|num_layers|dropout))$"
)


_NOT_SWITCHES = {*COLUMNS, "positional", "train_steps", "uniform"}


def switches(rows: list[Row]) -> list[str]:
    """The switch columns some row has (a model departing from the paper): aiayn's in their
    order, then any other a block reports (a plugin's), by name."""
    found = {key for row in rows for key, value in row.paper.items() if key not in _NOT_SWITCHES and value is not None}
    return [s for s in SWITCHES if s in found] + sorted(found - set(SWITCHES))


# The config paths a shown column reads its value from: such a path is hidden where the column
# already tells its rows apart (a rotary's base beside its fraction; the positions' layout beside
# their type). Any other path in which the rows differ gets a column of its own.
_COLUMN_PATHS = {
    "positional": re.compile(r"^model\.positional\."),
    "norm": re.compile(r"\.add_norm\.norm\."),
    "ffn": re.compile(r"\.(layer|overrides)\b.*\.(type|activation)$"),
    "kv_heads": re.compile(r"\.kv_heads$"),
    "rotary": re.compile(r"\.rotary(\.|$)"),
    "position_bias": re.compile(r"\.position_bias(\.|$)"),
    "graph": re.compile(r"^model\.(encoder|decoder|embedding)\."),  # what the decoder-only graph has and has not
}


_STACK = re.compile(r"^model\.(encoder|decoder)\.")


def differing(rows: list[Row]) -> list[str]:
    """The config paths in whose values the rows differ, in config order, but for what the table
    shows already: Table 3's and the switch columns, and the paths those columns read (where the
    column tells the rows apart as the path does). A setting of both stacks with the same values
    in every row is one column, model.{encoder,decoder}.<key>."""
    known = [row for row in rows if row.config is not None]
    if len(known) < 2:
        return []
    shown = {c: [_key(row.paper.get(c)) for row in known] for c in ["positional", *switches(rows)]}
    patterns = {**{c: re.compile(rf"\.{re.escape(c)}(\.|$)") for c in shown}, **_COLUMN_PATHS}  # a plugin's switch too
    paths = list(dict.fromkeys(p for row in known for p in row.config))  # type: ignore[union-attr]
    values_of = {path: [_key(row.config.get(path)) for row in known] for path in paths}  # type: ignore[union-attr]
    found: dict[str, list[str]] = {}
    for path, values in values_of.items():
        if _SHOWN.match(path) or len(set(values)) < 2 or _told_apart(path, values, values_of):
            continue
        if any(
            pattern.search(path) and column in shown and _determines(shown[column], values)
            for column, pattern in patterns.items()
        ):
            continue
        found[path] = values
    merged: list[str] = []
    for path, values in found.items():
        other = _STACK.sub(lambda m: f"model.{'decoder' if m.group(1) == 'encoder' else 'encoder'}.", path)
        if other != path and found.get(other) == values:
            both = _STACK.sub("model.{encoder,decoder}.", path)
            if both not in merged:
                merged.append(both)
            continue
        merged.append(path)
    return merged


def _told_apart(path: str, values: list[str], values_of: dict[str, list[str]]) -> bool:
    """Whether other columns tell the rows apart as `path` does: an empty list or mapping where
    other rows have items (`data.pipeline: []` beside `data.pipeline[0].type`), or a field that
    only some types of its block have (a SentencePiece tokenizer's character_coverage beside
    data.tokenizer.type)."""
    if all(v in ("[]", "{}", "null") for v in values) and any(p.startswith((f"{path}[", f"{path}.")) for p in values_of):
        return True
    owner = path.rpartition(".")[0]
    kind = values_of.get(f"{owner}.type") if owner and not path.endswith(".type") else None
    return kind is not None and len(set(kind)) > 1 and "null" in values and _determines(kind, values)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _determines(column: list[str], values: list[str]) -> bool:
    """Whether equal values in `column` always come with equal `values`."""
    seen: dict[str, str] = {}
    return all(seen.setdefault(c, v) == v for c, v in zip(column, values))


def setting(row: Row, path: str, *, full: bool = False) -> str:
    """The row's value of a config path as the table shows it (`full`: as the CSV keeps it)."""
    path = path.replace("model.{encoder,decoder}.", "model.encoder.")  # one column for both stacks' equal values
    if row.config is None or row.config.get(path) is None:
        return ""
    value = row.config[path]
    return (
        json.dumps(value)
        if isinstance(value, (dict, list))
        else str(value).lower()
        if isinstance(value, bool)
        else str(value)
        if full
        else short(value)
    )


def variant_label(row: Row) -> str:
    return row.variant + (" †" if row.paper.get("uniform") is False else "")

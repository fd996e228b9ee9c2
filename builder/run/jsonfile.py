"""JSON that aiayn did not write, or that may have changed since: one reader for all of it.

`json.loads` raises a RecursionError (no ValueError) on arrays nested a few thousand deep, and
reads a file of any size into memory. `read_json` turns both, and bytes that are not UTF-8 or not
JSON, into a JsonFileError, a ValueError whose message says why, so that every reader that names
a damaged file (config.json, vocab.json, tokenizer.json, prepared.json, results.json, sweep.json,
...) says it in one line.
"""

import json
from pathlib import Path
from typing import Any

LIMIT = 1 << 30  # bytes: a tokenizer.json of a large vocabulary is tens of MB; nothing aiayn reads is near this


class JsonFileError(ValueError):
    """A file that holds no JSON aiayn can read; the message says why."""


def read_json(path: Path, *, limit: int = LIMIT) -> Any:
    """The JSON value in `path`. OSError as reading raises it; JsonFileError where the file is
    larger than `limit` bytes, not UTF-8, not JSON, or nested deeper than the parser follows."""
    size = Path(path).stat().st_size
    if size > limit:
        raise JsonFileError(f"it is {size:,} bytes, more than the {limit:,} aiayn reads as JSON")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise JsonFileError(str(e)) from None
    return loads(text)


def loads(text: str) -> Any:
    """`json.loads(text)`, its failures a JsonFileError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise JsonFileError("its arrays or objects nest deeper than Python's JSON parser can follow") from None
    except ValueError as e:  # the decoder's own words: "Expecting value: line 1 column 1 (char 0)"
        raise JsonFileError(str(e)) from None


def json_type(value: Any) -> str:
    """How JSON names the type of a value json.loads returned."""
    return {list: "array", str: "string", bool: "boolean", int: "number", float: "number", type(None): "null", dict: "object"}[
        type(value)
    ]

"""Parallel text: two line-aligned UTF-8 files, and the length filter for training pairs."""

from collections.abc import Sequence, Sized
from pathlib import Path

import numpy as np

from builder.data.ragged import RaggedIds
from builder.errors import UserError


def file_not_found(path: Path) -> UserError:
    return UserError(f"corpus file not found: {path}; check the data path")


def read_lines(path: Path, *, block_bytes: int = 1 << 24) -> list[str]:
    """One sentence per line of a UTF-8 file, without the line ending.

    Lines are split on "\\n" only (a trailing "\\r" is dropped): str.splitlines would also split on
    U+2028, form feeds and the like, which can occur inside a sentence and would misalign the pair.
    A UTF-8 byte-order mark at the start of the file is not part of the first sentence. The file
    is decoded `block_bytes` at a time (cut after a newline, which is never inside a UTF-8
    character), so reading WMT's 4.5M lines needs little more memory than the lines themselves.
    """
    path = Path(path)
    lines: list[str] = []
    try:
        with open(path, "rb") as f:
            tail = b""
            while block := f.read(block_bytes):
                block = tail + block
                cut = block.rfind(b"\n") + 1  # the complete lines of the block
                tail = block[cut:]
                lines += _decode(path, block[:cut], lines).split("\n")[:-1]  # [:-1]: after the last newline
            if tail:  # a last line without a newline
                lines.append(_decode(path, tail, lines))
    except FileNotFoundError:
        raise file_not_found(path) from None
    except IsADirectoryError:
        raise UserError(f"corpus path is a directory, not a file: {path}") from None
    if lines:
        lines[0] = lines[0].removeprefix("\ufeff")
    return [line.removesuffix("\r") for line in lines]


def _decode(path: Path, block: bytes, before: list[str]) -> str:
    """The text of `block`, which follows the lines `before` in the file."""
    try:
        return block.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = len(before) + block.count(b"\n", 0, exc.start) + 1
        raise UserError(
            f"{path}, line {line}: invalid UTF-8 (byte 0x{block[exc.start]:02x}); "
            f"the corpus must be UTF-8 text: re-encode it, e.g. `iconv -f latin1 -t utf-8`"
        ) from None


def read_parallel(src_path: Path, tgt_path: Path) -> tuple[list[str], list[str]]:
    """Line N of `src_path` and line N of `tgt_path` are a translation pair."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise UserError(
            f"parallel corpus is misaligned: {src_path} has {len(src)} lines but {tgt_path} has "
            f"{len(tgt)}; line N of one file must translate line N of the other"
        )
    if not src:
        raise UserError(f"parallel corpus is empty: {src_path} and {tgt_path} have no lines")
    for path, lines in ((src_path, src), (tgt_path, tgt)):
        if not any(line.strip() for line in lines):
            raise UserError(f"{path}: all {len(lines)} lines are blank; it holds no sentences")
    return src, tgt


def _lengths(ids: Sequence[Sized] | RaggedIds) -> np.ndarray:
    if isinstance(ids, RaggedIds):
        return ids.lengths
    return np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))


def filter_by_length(
    src_ids: Sequence[Sized] | RaggedIds,
    tgt_ids: Sequence[Sized] | RaggedIds,
    *,
    max_len: int,
    min_len: int = 1,
) -> tuple[np.ndarray, dict[str, int]]:
    """Indices of the pairs whose both sides have min_len..max_len tokens (bos/eos not counted).

    Returns (kept indices in input order, counts) with counts keys "kept", "too_long" (either side
    longer than max_len) and "too_short" (otherwise, either side shorter than min_len).
    """
    if not 0 <= min_len <= max_len:
        raise UserError(
            f"length filter: need 0 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}"
        )
    src_len, tgt_len = _lengths(src_ids), _lengths(tgt_ids)
    if len(src_len) != len(tgt_len):
        raise ValueError(f"filter_by_length: {len(src_len)} sources but {len(tgt_len)} targets")
    too_long = (src_len > max_len) | (tgt_len > max_len)
    too_short = ~too_long & ((src_len < min_len) | (tgt_len < min_len))
    kept = np.flatnonzero(~too_long & ~too_short)
    counts = {"kept": len(kept), "too_long": int(too_long.sum()), "too_short": int(too_short.sum())}
    return kept, counts

"""Parallel text: two line-aligned UTF-8 files, and the length filter for training pairs."""

from collections.abc import Iterator, Sequence, Sized
from pathlib import Path
from typing import BinaryIO

import numpy as np

from aiayn.builder.data.ragged import RaggedIds
from aiayn.builder.errors import UserError


def file_not_found(path: Path) -> UserError:
    return UserError(f"corpus file not found: {path}; check the data path")


BLOCK_BYTES = 1 << 24  # the file is decoded this much at a time


def line_blocks(path: Path, *, block_bytes: int = BLOCK_BYTES) -> Iterator[list[str]]:
    """The lines of a UTF-8 file, without their line endings, a block of the file at a time.

    Lines are split on "\\n" only (a trailing "\\r" is dropped): str.splitlines would also split on
    U+2028, form feeds and the like, which can occur inside a sentence and would misalign the pair.
    A UTF-8 byte-order mark at the start of the file is not part of the first sentence. A block
    is cut after a newline, which is never inside a UTF-8 character, so a WMT-sized file can be
    tokenized without ever holding all its text (as Python strings, ~1.5x the file).
    """
    path, before, tail = Path(path), 0, b""
    with _open(path) as f:
        while block := f.read(block_bytes):
            block = tail + block
            cut = block.rfind(b"\n") + 1  # the complete lines of the block
            tail = block[cut:]
            if cut:
                lines = _decode(path, block[:cut], before).split("\n")[:-1]  # [:-1]: after the last newline
                yield _strip(lines, first=before == 0)
                before += len(lines)
        if tail:  # a last line without a newline
            yield _strip([_decode(path, tail, before)], first=before == 0)


def read_lines(path: Path, *, block_bytes: int = BLOCK_BYTES) -> list[str]:
    """One sentence per line of a UTF-8 file (see line_blocks)."""
    lines: list[str] = []
    for block in line_blocks(path, block_bytes=block_bytes):
        lines += block
    return lines


def count_lines(path: Path) -> int:
    """How many lines read_lines would return, without decoding them."""
    count, last = 0, b"\n"
    with _open(Path(path)) as f:
        while block := f.read(BLOCK_BYTES):
            count, last = count + block.count(b"\n"), block[-1:]
    return count + (last != b"\n")


def _open(path: Path) -> BinaryIO:
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise file_not_found(path) from None
    except IsADirectoryError:
        raise UserError(f"corpus path is a directory, not a file: {path}") from None


def _decode(path: Path, block: bytes, before: int) -> str:
    """The text of `block`, which follows `before` lines in the file."""
    try:
        return block.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = before + block.count(b"\n", 0, exc.start) + 1
        raise UserError(
            f"{path}, line {line}: invalid UTF-8 (byte 0x{block[exc.start]:02x}); "
            f"the corpus must be UTF-8 text: re-encode it, e.g. `iconv -f latin1 -t utf-8`"
        ) from None


def _strip(lines: list[str], *, first: bool) -> list[str]:
    if first and lines:
        lines[0] = lines[0].removeprefix("\ufeff")
    return [line.removesuffix("\r") for line in lines]


def sampled_lines(path: Path, n: int, keep: np.ndarray | None = None, *, block_bytes: int = BLOCK_BYTES) -> Iterator[str]:
    """The lines of `path` (`n` of them) whose numbers are in `keep` (sorted; None: every line),
    streamed a block at a time; at the end, the error of a file whose lines are all blank."""
    start, has_text = 0, False
    for block in line_blocks(path, block_bytes=block_bytes):
        has_text = has_text or any(line.strip() for line in block)
        if keep is None:
            yield from block
        else:
            lo, hi = keep.searchsorted([start, start + len(block)])
            yield from (block[i - start] for i in keep[lo:hi].tolist())
        start += len(block)
    check_not_blank(path, has_text, n)


def read_parallel(src_path: Path, tgt_path: Path) -> tuple[list[str], list[str]]:
    """Line N of `src_path` and line N of `tgt_path` are a translation pair."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    check_aligned(src_path, tgt_path, len(src), len(tgt))
    for path, lines in ((src_path, src), (tgt_path, tgt)):
        check_not_blank(path, any(line.strip() for line in lines), len(lines))
    return src, tgt


def count_parallel(src_path: Path, tgt_path: Path) -> int:
    """The number of pairs, or the errors of a misaligned or empty corpus before a line is decoded."""
    n = count_lines(src_path)
    check_aligned(src_path, tgt_path, n, count_lines(tgt_path))
    return n


def check_aligned(src_path: Path, tgt_path: Path, n_src: int, n_tgt: int) -> None:
    if n_src != n_tgt:
        raise UserError(
            f"parallel corpus is misaligned: {src_path} has {n_src} lines but {tgt_path} has "
            f"{n_tgt}; line N of one file must translate line N of the other"
        )
    if not n_src:
        if src_path == tgt_path:  # a language model's one file
            raise UserError(f"corpus file is empty: {src_path} has no lines")
        raise UserError(f"parallel corpus is empty: {src_path} and {tgt_path} have no lines")


def check_not_blank(path: Path, has_text: bool, n: int) -> None:
    """The error of a file whose `n` lines are all blank (`has_text` false)."""
    if not has_text:
        raise UserError(f"{path}: all {n} lines are blank; it holds no sentences")


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
        raise UserError(f"length filter: need 0 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
    src_len, tgt_len = _lengths(src_ids), _lengths(tgt_ids)
    if len(src_len) != len(tgt_len):
        raise ValueError(f"filter_by_length: {len(src_len)} sources but {len(tgt_len)} targets")
    too_long = (src_len > max_len) | (tgt_len > max_len)
    too_short = ~too_long & ((src_len < min_len) | (tgt_len < min_len))
    kept = np.flatnonzero(~too_long & ~too_short)
    counts = {"kept": len(kept), "too_long": int(too_long.sum()), "too_short": int(too_short.sum())}
    return kept, counts

"""Tokenized corpora cached on disk, so re-runs and sweep trials do not tokenize again.

The key is a SHA-256 of the two files' bytes and of the tokenizers' JSON. Content, not
(path, size, mtime): hashing reads at about 1 GB/s, seconds even for WMT14's 1.3 GB against
minutes of tokenizing, and a content key survives what metadata keys get wrong: a corpus copied
to a node's scratch disk or re-generated identically (new path or mtime, same text: a hit) and an
edit within the mtime's resolution that keeps the size (same metadata, new text: a miss).

Reading a corpus to hash it costs what reading it costs: WMT14 EN-FR's 12 GB take most of a
minute. So `keys.json` in the cache remembers each key by what names the files' bytes without
reading them (device, inode, size, mtime and ctime in ns, both files) and the tokenizers' JSON, as
git's index remembers files: trusted only where the files were last modified at least RACY_S
before the hashing began, so that a write within a coarse mtime's resolution is hashed again.

An entry is a folder `{source file's stem}-{key}/` of four .npy files (the RaggedIds of each
side), memory-mapped when read: loading 4.5M pairs takes no time and no memory until a batch
touches them, and every process reading the entry shares one copy in the page cache.
"""

import contextlib
import hashlib
import io
import itertools
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aiayn.builder.data.corpus import check_not_blank, count_parallel, file_not_found, line_blocks
from aiayn.builder.data.ragged import RaggedIds
from aiayn.builder.data.tokenizer import Tokenizer
from aiayn.builder.errors import UserError

log = logging.getLogger(__name__)

FORMAT_VERSION = 2  # bump when the layout changes (1: one .npz, read whole into memory)
_ARRAYS = ("src_flat", "src_offsets", "tgt_flat", "tgt_offsets")  # one .npy file each, in the entry's folder
CHUNK_LINES = 50_000  # lines per call of the Rust encoder


def hash_file(h: "hashlib._Hash", path: Path) -> None:
    try:
        with open(path, "rb") as f:
            h.update(f"{path.stat().st_size}\0".encode())  # keeps the two files' bytes apart
            while chunk := f.read(1 << 20):
                h.update(chunk)
    except FileNotFoundError:
        raise file_not_found(path) from None


def cache_key(src_path: Path, tgt_path: Path, src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer) -> str:
    h = hashlib.sha256(f"aiayn-encoded-v{FORMAT_VERSION}\0".encode())
    hash_file(h, Path(src_path))
    hash_file(h, Path(tgt_path))
    for tokenizer in (src_tokenizer, tgt_tokenizer):
        text = tokenizer.to_json().encode("utf-8")
        h.update(f"{len(text)}\0".encode())
        h.update(text)
    return h.hexdigest()[:32]


KEYS_FILE = "keys.json"  # the cache keys remembered by the files' identity (see the module's docstring)
RACY_S = 2.0  # seconds: files modified closer than this to their hashing are hashed again next time
KEYS_KEPT = 1000  # entries of KEYS_FILE, the newest


def remembered_key(
    cache_dir: Path, src_path: Path, tgt_path: Path, src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer
) -> tuple[str, Callable[[], None]]:
    """cache_key's value, from KEYS_FILE where the files are as they were when it was hashed; and
    the function that remembers it (called once the entry is in the cache: a failure writes nothing)."""
    h = hashlib.sha256()
    try:
        stats = [Path(p).stat() for p in (src_path, tgt_path)]
    except FileNotFoundError as e:
        raise file_not_found(Path(e.filename)) from None
    for path, st in zip((src_path, tgt_path), stats):
        h.update(f"{Path(path).resolve()}\0{st.st_dev}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0".encode())
    for tokenizer in (src_tokenizer, tgt_tokenizer):
        h.update(tokenizer.to_json().encode("utf-8") + b"\0")
    identity, newest, started = h.hexdigest(), max(max(st.st_mtime, st.st_ctime) for st in stats), time.time()
    known: Any = _read_keys(cache_dir).get(identity)
    if _trusted(known, newest):
        return known["key"], lambda: None
    key = cache_key(src_path, tgt_path, src_tokenizer, tgt_tokenizer)
    if started <= newest + RACY_S:  # racy: the files may change again within their mtime's resolution
        return key, lambda: None
    return key, lambda: _remember(cache_dir, identity, {"key": key, "hashed_at": started})


def _trusted(entry: Any, newest: float) -> bool:
    """A remembered key, well formed (32 hex digits: it names a folder), hashed RACY_S after the files' last change."""
    if not isinstance(entry, dict) or not isinstance(entry.get("key"), str) or not re.fullmatch(r"[0-9a-f]{32}", entry["key"]):
        return False
    hashed_at = entry.get("hashed_at")
    return isinstance(hashed_at, (int, float)) and not isinstance(hashed_at, bool) and hashed_at > newest + RACY_S


def _read_keys(cache_dir: Path) -> dict:
    try:
        keys = json.loads((cache_dir / KEYS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # none yet, or unreadable: every key is hashed (and the file written anew)
        return {}
    return keys if isinstance(keys, dict) else {}


def _remember(cache_dir: Path, identity: str, entry: dict) -> None:
    keys = {**_read_keys(cache_dir), identity: entry}
    newest = sorted((item for item in keys.items() if _trusted(item[1], 0)), key=lambda item: item[1]["hashed_at"])
    with contextlib.suppress(OSError):  # an unwritable cache is said where an entry is written; this only saves time
        fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=f".{KEYS_FILE}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(dict(newest[-KEYS_KEPT:]), f)
        os.replace(tmp, cache_dir / KEYS_FILE)


def encode_lines(tokenizer: Tokenizer, lines: Sequence[str], *, chunk_lines: int = CHUNK_LINES) -> RaggedIds:
    """The ids of every line (see encode_blocks)."""
    return encode_blocks(tokenizer, [lines], chunk_lines=chunk_lines)


def encode_blocks(tokenizer: Tokenizer, blocks: Iterable[Sequence[str]], *, chunk_lines: int = CHUNK_LINES) -> RaggedIds:
    """The ids of every line of consecutive blocks of lines, encoded a chunk at a time: the Rust
    encoder returns an Encoding object per line (tokens, offsets, masks: ~100 bytes a token),
    which must never exist for the whole of a WMT-sized corpus at once, nor must its ids as
    Python lists (~36 bytes an id)."""
    lengths, flats = [], []
    for block in blocks:
        for start in range(0, len(block), chunk_lines):
            ids = tokenizer.encode_batch(block[start : start + chunk_lines])
            lengths.append(np.fromiter(map(len, ids), dtype=np.int64, count=len(ids)))
            flats.append(np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int32, count=int(lengths[-1].sum())))
    return RaggedIds.from_chunks(flats, lengths)


def encode_corpus(
    src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer, src_path: Path, tgt_path: Path
) -> tuple[RaggedIds, RaggedIds]:
    """Reads and tokenizes a parallel corpus, without any cache, a block of lines at a time (the
    whole text of WMT's 4.5M pairs would take ~4 GB as Python strings)."""
    n = count_parallel(src_path, tgt_path)  # a misaligned corpus fails before minutes of encoding
    return _encode_file(src_tokenizer, src_path, n), _encode_file(tgt_tokenizer, tgt_path, n)


def _encode_file(tokenizer: Tokenizer, path: Path, n: int) -> RaggedIds:
    has_text = False

    def blocks() -> Iterator[list[str]]:
        nonlocal has_text
        for block in line_blocks(path):
            has_text = has_text or any(line.strip() for line in block)
            yield block

    ids = encode_blocks(tokenizer, blocks())
    check_not_blank(path, has_text, n)
    return ids


def _load(folder: Path, *, warn: bool = True) -> tuple[RaggedIds, RaggedIds] | None:
    """The cached ids, memory-mapped (see RaggedIds.open), or None to encode again."""
    if not folder.is_dir():
        return None
    try:
        src = RaggedIds.open(folder / "src_flat.npy", folder / "src_offsets.npy")
        tgt = RaggedIds.open(folder / "tgt_flat.npy", folder / "tgt_offsets.npy")
        if len(src) != len(tgt):
            raise ValueError(f"{len(src)} sources but {len(tgt)} targets")
        return src, tgt
    except Exception as exc:  # a file missing or truncated, written by another version...: rebuild it
        if warn:
            log.warning("ignoring unreadable cache %s (%s); encoding again", folder, exc)
        return None


def _store(folder: Path, src: RaggedIds, tgt: RaggedIds) -> None:
    """Writes the four arrays of ids in memory as the entry `folder` (see _write_entry)."""

    def write(tmp: Path) -> None:
        for name, array in zip(_ARRAYS, (src.flat, src.offsets, tgt.flat, tgt.offsets)):
            with open(tmp / f"{name}.npy", "wb") as f:
                np.save(f, array)
                f.flush()
                os.fsync(f.fileno())

    _write_entry(folder, write)


def _write_entry(folder: Path, write: Callable[[Path], None]) -> None:
    """`write(tmp)` fills a private folder, which is renamed into place (atomic, as atomic_write is
    for a file); an unreadable folder already there is replaced. A failure leaves no folder of it,
    nor the cache directory where this made it."""
    made = [d for d in (folder.parent, *folder.parent.parents) if not d.exists()]
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".tmp"))
    try:
        write(tmp)
        os.chmod(tmp, 0o755)  # mkdtemp makes 0700; the cache is shared like any folder
        if folder.exists():
            if _load(folder, warn=False) is not None:  # a concurrent writer got there first, with the same ids
                shutil.rmtree(tmp)
                return
            os.replace(folder, tmp.with_name(tmp.name + ".old"))  # unreadable; a rename cannot replace a full folder
            shutil.rmtree(tmp.with_name(tmp.name + ".old"), ignore_errors=True)
        os.replace(tmp, folder)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        for d in made:  # the innermost first
            with contextlib.suppress(OSError):
                d.rmdir()
        if not isinstance(exc, OSError) or _load(folder, warn=False) is None:  # not a concurrent writer's equal entry
            raise


def _encode_file_to(tokenizer: Tokenizer, path: Path, n: int, flat: Path, offsets: Path) -> None:
    """The ids of every line of `path` written as a RaggedIds' two .npy files a chunk at a time, as
    encode_blocks encodes them: memory holds one chunk of ids and the lines' lengths (8 bytes a
    line), whatever the corpus's size (the in-memory arrays of WMT14's 4.5M pairs took 2.4 GB)."""
    lengths, total, has_text = [np.zeros(0, dtype=np.int64)], 0, False
    with open(flat, "wb") as f:
        header = _flat_header(0)
        f.write(header)  # rewritten with the count at the end: the header's length does not depend on it
        for block in line_blocks(path):
            has_text = has_text or any(line.strip() for line in block)
            for start in range(0, len(block), CHUNK_LINES):
                ids = tokenizer.encode_batch(block[start : start + CHUNK_LINES])
                counts = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
                f.write(np.fromiter(itertools.chain.from_iterable(ids), dtype="<i4", count=int(counts.sum())).tobytes())
                lengths.append(counts)
                total += int(counts.sum())
        check_not_blank(path, has_text, n)
        f.seek(0)
        f.write(_flat_header(total, length=len(header)))
        f.flush()
        os.fsync(f.fileno())
    ends = np.zeros(sum(len(c) for c in lengths) + 1, dtype=np.int64)
    np.cumsum(np.concatenate(lengths), out=ends[1:])
    with open(offsets, "wb") as f:
        np.save(f, ends)
        f.flush()
        os.fsync(f.fileno())


def _flat_header(count: int, length: int | None = None) -> bytes:
    """The .npy header of `count` little-endian int32s (NumPy pads it to a length that leaves room
    for any count, so that it can be written first and again at the end)."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": "<i4", "fortran_order": False, "shape": (count,)})
    header = buffer.getvalue()
    if length is not None and len(header) != length:
        raise RuntimeError(f"the .npy header of {count} ids is {len(header)} bytes, not the {length} written first")
    return header


def encode_cached(
    tokenizer: Tokenizer,
    src_path: Path,
    tgt_path: Path,
    cache_dir: Path | None,
    *,
    tgt_tokenizer: Tokenizer | None = None,
) -> tuple[RaggedIds, RaggedIds]:
    """Token ids of every line of the two files (no bos/eos), from `cache_dir` when present.

    `tokenizer` encodes the source, and the target too unless `tgt_tokenizer` is given (separate
    vocabularies). `cache_dir=None` turns caching off. Returns (source ids, target ids), one
    sequence per line, in file order.
    """
    src_path, tgt_path = Path(src_path), Path(tgt_path)
    tgt_tokenizer = tgt_tokenizer or tokenizer
    if cache_dir is None:
        return encode_corpus(tokenizer, tgt_tokenizer, src_path, tgt_path)
    key, remember = remembered_key(Path(cache_dir), src_path, tgt_path, tokenizer, tgt_tokenizer)
    folder = Path(cache_dir) / f"{src_path.stem}-{key}"
    if (hit := _load(folder)) is not None:
        log.info("tokenized %s/%s from cache %s", src_path.name, tgt_path.name, folder)
        remember()
        return hit
    n = count_parallel(src_path, tgt_path)  # a misaligned corpus fails before minutes of encoding

    def write(tmp: Path) -> None:  # each side's ids streamed into the entry's files
        _encode_file_to(tokenizer, src_path, n, tmp / "src_flat.npy", tmp / "src_offsets.npy")
        _encode_file_to(tgt_tokenizer, tgt_path, n, tmp / "tgt_flat.npy", tmp / "tgt_offsets.npy")

    try:
        _write_entry(folder, write)
    except OSError as exc:
        raise UserError(
            f"cannot write the token cache {folder} ({exc.strerror}); point the cache directory at a writable place"
        ) from None
    log.info("tokenized %s/%s into cache %s", src_path.name, tgt_path.name, folder)
    loaded = _load(folder)  # memory-mapped: its pages can be shared and dropped
    if loaded is None:
        raise UserError(f"the token cache {folder} cannot be read back after writing it; point the cache directory elsewhere")
    remember()
    return loaded

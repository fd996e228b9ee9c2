"""Tokenized corpora cached on disk, so re-runs and sweep trials do not tokenize again.

The key is a SHA-256 of the two files' bytes and of the tokenizers' JSON. Content, not
(path, size, mtime): hashing reads at about 1 GB/s, seconds even for WMT14's 1.3 GB against
minutes of tokenizing, and a content key survives what metadata keys get wrong: a corpus copied
to a node's scratch disk or re-generated identically (new path or mtime, same text: a hit) and an
edit within the mtime's resolution that keeps the size (same metadata, new text: a miss).
"""

import hashlib
import logging
from pathlib import Path

import numpy as np

from builder.data.corpus import file_not_found, read_parallel
from builder.data.ragged import RaggedIds
from builder.data.tokenizer import Tokenizer
from builder.errors import UserError
from builder.run.atomic import atomic_write

log = logging.getLogger(__name__)

FORMAT_VERSION = 1  # bump when the layout of the .npz changes
_ARRAYS = ("src_flat", "src_offsets", "tgt_flat", "tgt_offsets")


def _hash_file(h: "hashlib._Hash", path: Path) -> None:
    try:
        with open(path, "rb") as f:
            h.update(f"{path.stat().st_size}\0".encode())  # keeps the two files' bytes apart
            while chunk := f.read(1 << 20):
                h.update(chunk)
    except FileNotFoundError:
        raise file_not_found(path) from None


def cache_key(src_path: Path, tgt_path: Path, src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer) -> str:
    h = hashlib.sha256(f"aiayn-encoded-v{FORMAT_VERSION}\0".encode())
    _hash_file(h, Path(src_path))
    _hash_file(h, Path(tgt_path))
    for tokenizer in (src_tokenizer, tgt_tokenizer):
        text = tokenizer.to_json().encode("utf-8")
        h.update(f"{len(text)}\0".encode())
        h.update(text)
    return h.hexdigest()[:32]


def encode_corpus(
    src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer, src_path: Path, tgt_path: Path
) -> tuple[RaggedIds, RaggedIds]:
    """Reads and tokenizes a parallel corpus, without any cache."""
    src, tgt = read_parallel(src_path, tgt_path)
    return (
        RaggedIds.from_lists(src_tokenizer.encode_batch(src)),
        RaggedIds.from_lists(tgt_tokenizer.encode_batch(tgt)),
    )


def _load(path: Path) -> tuple[RaggedIds, RaggedIds] | None:
    try:
        with np.load(path) as z:
            arrays = {name: z[name] for name in _ARRAYS}
        return (
            RaggedIds(flat=arrays["src_flat"], offsets=arrays["src_offsets"]),
            RaggedIds(flat=arrays["tgt_flat"], offsets=arrays["tgt_offsets"]),
        )
    except FileNotFoundError:
        return None
    except Exception as exc:  # truncated by a full disk, written by another version...: rebuild it
        log.warning("ignoring unreadable cache file %s (%s); encoding again", path, exc)
        return None


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
    key = cache_key(src_path, tgt_path, tokenizer, tgt_tokenizer)
    path = Path(cache_dir) / f"{src_path.stem}-{key}.npz"
    if (hit := _load(path)) is not None:
        log.info("tokenized %s/%s from cache %s", src_path.name, tgt_path.name, path)
        return hit
    src, tgt = encode_corpus(tokenizer, tgt_tokenizer, src_path, tgt_path)
    try:
        with atomic_write(path) as f:
            np.savez(f, src_flat=src.flat, src_offsets=src.offsets, tgt_flat=tgt.flat, tgt_offsets=tgt.offsets)
    except OSError as exc:
        raise UserError(
            f"cannot write the token cache {path} ({exc.strerror}); "
            f"point the cache directory at a writable place"
        ) from None
    log.info("tokenized %s/%s into cache %s", src_path.name, tgt_path.name, path)
    return src, tgt

"""Write a file so that readers see the old file or the whole new one, never a half-written one.

Every file aiayn writes goes through `atomic_write`: checkpoints, run files (config, status,
results), the token cache, tokenizers, translations. Concurrent sweep trials share the cache and
demo directories; each writes a private temp file in the target's directory (same filesystem),
flushes it to disk and renames it into place, which POSIX makes atomic.
"""

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from aiayn.builder.errors import UserError, check_name_lengths


@contextmanager
def atomic_write(path: Path) -> Iterator[BinaryIO]:
    """Yields a binary file; on a clean exit it replaces `path`, on an exception it is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; the run and cache files are ordinary files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_writable(path: Path, what: str) -> None:
    """Refuse, before any work, an output path that names a folder, lies under a file, or is
    longer than a filesystem takes."""
    path = Path(path)
    check_name_lengths(path, what)
    if path.is_dir():
        raise UserError(f"{what} {path} is a folder; give the name of a file to write")
    blocking = next((p for p in path.parents if p.exists()), None)
    if blocking is not None and not blocking.is_dir():
        raise UserError(f"{what} {path}: {blocking} is a file, so nothing can be written under it")


def write_bytes_atomic(path: Path, data: bytes) -> None:
    with atomic_write(path) as f:
        f.write(data)


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2) + "\n")


def dump_yaml(data: Any) -> str:
    """Block style, keys in their order, short lists inline: how the shipped experiments read."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100, allow_unicode=True)


def check_folder_output(out: Path, *, force: bool, purpose: str) -> None:
    """Refuse, before any work, an output folder that cannot be written, or that holds files
    (unless `force`: then `staged_folder` replaces it once the new one is whole)."""
    blocking = next((p for p in out.parents if p.exists()), None)
    if blocking is not None and not blocking.is_dir():
        raise UserError(f"{out}: {blocking} is a file, so nothing can be written under it")
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} is a file; give a folder to {purpose}")
    if out.is_dir() and any(out.iterdir()) and not force:
        names = sorted(p.name for p in out.iterdir())
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        raise UserError(f"{out} already holds files ({shown}); give a new or empty folder, or --force to replace it")


@contextmanager
def staged_folder(out: Path) -> Iterator[Path]:
    """A folder written whole or not at all: yields an empty hidden folder beside `out`; on a
    clean exit it becomes `out` (an existing `out` is replaced), on an exception it is removed,
    with every folder made for it."""
    made = next((p for p in reversed((out, *out.parents)) if not p.exists()), None)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        yield tmp
        os.chmod(tmp, 0o755)  # mkdtemp makes 0700; an output folder is an ordinary folder
        _replace_folder(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if made is not None and made != out:
            shutil.rmtree(made, ignore_errors=True)
        raise


def _replace_folder(new: Path, out: Path) -> None:
    if out.is_dir() and not any(out.iterdir()):
        out.rmdir()
    if not out.exists():
        os.rename(new, out)
        return
    old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".old"))
    os.rename(out, old / out.name)
    os.rename(new, out)
    shutil.rmtree(old, ignore_errors=True)

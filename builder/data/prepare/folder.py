"""The output folder of `aiayn data`, written all at once: the files are prepared in a hidden
sibling folder that is renamed into place at the end, so a failed or interrupted command leaves
nothing behind and an existing folder is never half-replaced."""

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from builder.errors import UserError


def check_output(out: Path, *, force: bool, source: Path | None = None) -> None:
    """Refuse, before any work, a folder that cannot or should not be written."""
    blocking = next((p for p in out.parents if p.exists()), None)
    if blocking is not None and not blocking.is_dir():
        raise UserError(f"{out}: {blocking} is a file, so nothing can be written under it")
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} is a file; give a folder to write the corpus into")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            names = sorted(p.name for p in out.iterdir())
            shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
            raise UserError(f"{out} already holds files ({shown}); give a new or empty folder, or --force to replace it")
        if source is not None and source.resolve().is_relative_to(out.resolve()):
            raise UserError(f"--from {source} is inside {out}, which --force would replace; write the corpus to another folder")


@contextmanager
def staged(out: Path) -> Iterator[Path]:
    """Yields an empty hidden folder beside `out`; on a clean exit it becomes `out` (an existing
    `out` is replaced), on an exception it is removed with every folder made for it."""
    made = next((p for p in reversed((out, *out.parents)) if not p.exists()), None)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        yield tmp
        os.chmod(tmp, 0o755)  # mkdtemp makes 0700; a corpus folder is an ordinary folder
        replace_folder(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if made is not None and made != out:
            shutil.rmtree(made, ignore_errors=True)
        raise


def replace_folder(new: Path, out: Path) -> None:
    if out.is_dir() and not any(out.iterdir()):
        out.rmdir()
    if not out.exists():
        os.rename(new, out)
        return
    old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".old"))
    os.rename(out, old / out.name)
    os.rename(new, out)
    shutil.rmtree(old, ignore_errors=True)

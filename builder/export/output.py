"""The export folder appears whole or not at all.

An exporter writes into a private sibling folder (same filesystem), which is renamed to OUT only
when everything is written; a failure or a kill leaves OUT as it was. An existing, non-empty OUT
is refused unless `force`, and then replaced only once the new one is complete.
"""

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from builder.errors import UserError


def check_output(out: Path, *, force: bool) -> None:
    """Refuse, before any work, an OUT that is a file, lies under a file, or holds files (unless force)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} is a file; give a folder to export into")
    blocking = next((p for p in out.parents if p.exists()), None)
    if blocking is not None and not blocking.is_dir():
        raise UserError(f"{out}: {blocking} is a file, so nothing can be written under it")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise UserError(f"{out} exists and is not empty; give a new folder, or --force to replace it")


@contextmanager
def staged_folder(out: Path, *, force: bool) -> Iterator[Path]:
    """Yields an empty private folder; on a clean exit it becomes `out` (replacing it if `force`)."""
    out = Path(out)
    check_output(out, force=force)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".partial"))
    try:
        yield staging
        os.chmod(staging, 0o755)  # mkdtemp makes 0700; an export is an ordinary folder
        if out.exists():
            old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".old"))
            os.replace(out, old / out.name)
            os.replace(staging, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise

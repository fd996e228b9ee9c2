"""What a command may write, and who may write into a run: the one rule every verb that writes
goes through, and the run directory's lock.

The rule (`check_output`): an output may not be, contain, or lie inside one of the command's
inputs, nor be, contain or lie inside a run directory, whether the output exists yet or not (a
run directory is its own training's: a new file in it could pass for one of its own, a step
checkpoint or a translation). Checked before any work, so a refused command leaves every byte of
its inputs and of every run as it was.

The lock (`hold_run`): an OS lock (flock) on the run directory itself, taken by `aiayn train`
for the whole run; the kernel
releases it when the process ends, however it ends (a SIGKILL leaves no stale lock), and it
leaves no file behind. Its holder is named from /proc/locks where there is one.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from aiayn.builder.errors import UserError, resolved

_HELD: dict[Path, int] = {}  # run directory -> the descriptor whose lock this process holds


def is_run(folder: Path) -> bool:
    """Whether `folder` is a run directory (a run's status or checkpoints are there)."""
    return (folder / "status.json").is_file() or (folder / "checkpoints").is_dir()


def run_of(path: Path) -> Path | None:
    """The run directory `path` is in (or is), if any."""
    path = resolved(Path(path))
    return next((p for p in (path, *path.parents) if p.is_dir() and is_run(p)), None)


def check_output(out: Path, what: str, *, inputs: Iterable[Path] = ()) -> None:
    """Refuse, naming `what` (the option: "--output", "OUT"), an output that is, contains or
    lies inside an input, or that is or holds a file of an existing run."""
    target = resolved(Path(out))
    for given in inputs:
        source = resolved(Path(given))
        if target == source:
            raise UserError(f"{what} {out} is one of the files this command reads; write to another path")
        if source in target.parents:
            raise UserError(f"{what} {out} lies inside {given}, which this command reads; write outside it")
        if target in source.parents:
            raise UserError(f"{what} {out} holds {given}, which this command reads; write to another path")
    existing = next(p for p in (target, *target.parents) if p.exists())  # where a new output would be made
    run = run_of(existing)
    if run is not None:
        raise UserError(
            f"{what} {out} is {'the run directory' if run == target else 'part of the run'} {run}, which "
            "only its training writes; write to a new path"
        )
    if target.is_dir():
        inside = next((p for p in _folders_below(target, depth=2) if is_run(p)), None)
        if inside is not None:
            raise UserError(f"{what} {out} holds the run directory {inside}; write to another path")


def _folders_below(folder: Path, *, depth: int) -> Iterator[Path]:
    """The folders under `folder` down to `depth` levels (runs/<name>/version_<n> is two)."""
    if depth == 0:
        return
    for child in folder.iterdir():
        if child.is_dir() and not child.is_symlink():
            yield child
            yield from _folders_below(child, depth=depth - 1)


def hold_run(run: Path, *, doing: str) -> None:
    """Lock `run` (created if new) for this process until it ends; a run another process holds
    is a UserError naming it. Holding it already is fine."""
    run = Path(run)
    run.mkdir(parents=True, exist_ok=True)
    key = resolved(run)
    if key in _HELD:
        return
    fd = os.open(key, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise UserError(f"{run} is in use by {holder(key)}; {doing} when it is done (or stop it)") from None
    _HELD[key] = fd


def release_run(run: Path) -> None:
    fd = _HELD.pop(resolved(Path(run)), None)
    if fd is not None:
        os.close(fd)  # closing the descriptor releases the lock


def holder(folder: Path) -> str:
    """Who holds the lock of `folder`: "pid N (its command line)" from /proc/locks, or "another process"."""
    try:
        st = os.stat(folder)
        wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == wanted:
                pid = int(fields[4])
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                return f"pid {pid} ({_short(command)})"
    except (OSError, ValueError):
        pass
    return "another process"


def _short(command: str) -> str:
    """`python -m aiayn train exp.yaml ...` -> `aiayn train exp.yaml ...`, at most 80 characters."""
    words = command.split()
    if "aiayn" in words:
        words = words[words.index("aiayn") :]
    elif any(w.endswith("/aiayn") for w in words):
        words = ["aiayn", *words[next(i for i, w in enumerate(words) if w.endswith("/aiayn")) + 1 :]]
    text = " ".join(words)
    return text if len(text) <= 80 else text[:77] + "..."

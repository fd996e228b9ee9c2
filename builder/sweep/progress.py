"""What `aiayn sweep` prints while its trials train: a line for each running trial, its step and
ETA as its progress.json says (builder/train/progress.py's ProgressFile writes it every few
seconds). On a terminal the lines are rewritten in place every `every_s` seconds; anywhere else
(a log file, a pipe, CI) they are printed every `plain_every_s` seconds, so that a log of hours
stays short. A trial's own lines (finished, failed) go through `say`, above the running ones."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TextIO

from aiayn.builder.run.clock import clock
from aiayn.builder.run.rundir import RunDir
from aiayn.builder.sweep.launch import Job


class TrialLines:
    """The running trials' lines of `jobs` (those whose progress.json was written since `since`,
    a time.time(), and which have not ended)."""

    def __init__(
        self,
        jobs: Sequence[Job],
        stream: TextIO | None = None,
        *,
        interactive: bool | None = None,
        every_s: float = 2.0,
        plain_every_s: float = 600.0,
        since: float | None = None,
    ) -> None:
        self.jobs, self.stream = list(jobs), stream or sys.stdout
        self.interactive = self.stream.isatty() if interactive is None else interactive
        self.every_s = every_s if self.interactive else plain_every_s
        self.since = time.time() if since is None else since
        self.ended: set[str] = set()
        self.lock = threading.Lock()
        self._drawn = 0  # lines of the block on screen (a terminal's)
        self._stop = threading.Event()

    def lines(self) -> list[str]:
        """`  name: step 1,340/5,000, ETA 12m05s` for each running trial, in the sweep's order."""
        out = []
        for job in self.jobs:
            progress = None if job.name in self.ended else RunDir(job.run_dir).progress()
            if not progress or progress.get("written_at", 0) < self.since:
                continue
            eta = progress.get("eta_s")
            pace = f", ETA {clock(eta)}" if isinstance(eta, (int, float)) else ""
            out.append(f"  {job.name}: step {progress['step']:,}/{progress['max_steps']:,}{pace}")
        return out

    def draw(self) -> None:
        """The running trials' lines: on a terminal in place of the last ones drawn, else printed."""
        with self.lock:
            self._clear()
            lines = self.lines()
            if lines:
                self.stream.write("".join(line + "\n" for line in lines))
            self._drawn = len(lines) if self.interactive else 0
            self.stream.flush()

    def say(self, line: str) -> None:
        """A line of the sweep's own (a trial ended), above the running trials' lines."""
        with self.lock:
            self._clear()
            self.stream.write(line + "\n")
            self.stream.flush()
        if self.interactive:
            self.draw()

    def end(self, name: str) -> None:
        """A trial that ended: no line of it from now on."""
        with self.lock:
            self.ended.add(name)

    @contextmanager
    def shown(self) -> Iterator[TrialLines]:
        """The lines drawn in a thread of their own while the block runs; the terminal's taken away after."""
        thread = threading.Thread(target=self._loop, name="aiayn-sweep-progress", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()
            with self.lock:
                self._clear()
                self.stream.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.draw()

    def _clear(self) -> None:
        if self._drawn:  # up a line and clear it, for each line of the block
            self.stream.write("\x1b[F\x1b[K" * self._drawn)
            self._drawn = 0

"""What `aiayn train` prints while it trains: one line per validation, and a status line.

On a terminal the status line (step, loss, lr, tokens/s, ETA) is rewritten in place; anywhere
else (a log file, a pipe, CI) a plain line is printed every tenth of the run instead, so the
output stays a few readable lines rather than one carriage-return-joined blob.
"""

import logging
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import lightning as L
from lightning.pytorch.callbacks import ProgressBar

from aiayn.builder.train.board import PPL
from aiayn.builder.train.callbacks import ValidationTranslations


class ConsoleProgress(ProgressBar):
    """Lightning's progress-bar slot, filled with a few plain lines (rank 0 only)."""

    def __init__(self, stream: TextIO | None = None, *, interactive: bool | None = None) -> None:
        super().__init__()
        self.stream = stream or sys.stdout
        self.interactive = self.stream.isatty() if interactive is None else interactive
        self._enabled = True
        self._start: tuple[float, int] | None = None  # (time, global step) at train start
        self._last_draw = 0.0
        self._open_line = False  # a status line is on screen, not yet ended by a newline
        self._printed_step = -1

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    @property
    def is_enabled(self) -> bool:
        return self._enabled

    # ---- hooks -----------------------------------------------------------------------------

    def on_train_start(self, trainer: L.Trainer, task: L.LightningModule) -> None:
        self._start = (time.perf_counter(), trainer.global_step)
        if self._enabled:
            resumed = f", resuming at step {trainer.global_step}" if trainer.global_step else ""
            self._line(f"training {task.spec.name}: {trainer.max_steps} steps on {trainer.strategy.root_device.type}{resumed}")

    def on_train_batch_end(self, trainer: L.Trainer, task: L.LightningModule, *args: Any) -> None:
        if not self._enabled or self._start is None:
            return
        step = trainer.global_step
        if self.interactive:
            if time.perf_counter() - self._last_draw >= 0.5 or step == trainer.max_steps:
                self._status(self.status(trainer, task))
        elif step % max(trainer.max_steps // 5, 1) == 0 and step != self._printed_step:
            self._line(self.status(trainer, task))
        self._printed_step = step

    def on_validation_end(self, trainer: L.Trainer, task: L.LightningModule) -> None:
        if self._enabled and not trainer.sanity_checking and self._start is not None:
            self._line(self.validation(trainer, task))

    def on_train_end(self, trainer: L.Trainer, task: L.LightningModule) -> None:
        if self._open_line:
            self._line("")

    # ---- the lines ---------------------------------------------------------------------------

    def status(self, trainer: L.Trainer, task: L.LightningModule) -> str:
        m = trainer.callback_metrics
        parts = [f"step {trainer.global_step}/{trainer.max_steps}"]
        if "loss/train" in m:
            parts.append(f"loss {float(m['loss/train']):.3f}")
        if "lr" in m:
            parts.append(f"lr {float(m['lr']):.2e}")
        return "  ".join(parts + self._pace(trainer, task))

    def validation(self, trainer: L.Trainer, task: L.LightningModule) -> str:
        m = trainer.callback_metrics
        parts = [f"step {trainer.global_step}/{trainer.max_steps}  valid"]
        if "loss/valid" in m:
            parts.append(f"loss {float(m['loss/valid']):.3f}  PPL {float(m[PPL]):.2f}")
        for bleu in (c for c in trainer.callbacks if isinstance(c, ValidationTranslations) and c.bleu_tag in m):
            parts.append(f"BLEU {float(m[bleu.bleu_tag]):.2f} ({bleu.label})")
        return "  ".join(parts + self._pace(trainer, task))

    def _pace(self, trainer: L.Trainer, task: L.LightningModule) -> list[str]:
        t0, step0 = self._start
        elapsed, done = time.perf_counter() - t0, trainer.global_step - step0
        if done <= 0 or elapsed <= 0:
            return []
        eta = (trainer.max_steps - trainer.global_step) * elapsed / done  # validations included
        m = trainer.callback_metrics
        rate = [f"{float(m['train/tokens_per_s']) * trainer.world_size / 1000:.1f}k tok/s"] if "train/tokens_per_s" in m else []
        return [*rate, f"ETA {clock(eta)}"]

    def _status(self, text: str) -> None:
        self.stream.write("\r" + text + "\x1b[K")
        self.stream.flush()
        self._open_line, self._last_draw = True, time.perf_counter()

    def _line(self, text: str) -> None:
        if self._open_line:
            self.stream.write("\r\x1b[K")
            self._open_line = False
        if text:
            self.stream.write(text + "\n")
        self.stream.flush()


def clock(seconds: float) -> str:
    """1h02m, 4m05s, 37s."""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


@contextmanager
def quiet_lightning() -> Iterator[None]:
    """While training: Lightning's information lines (devices found, tips, "`Trainer.fit`
    stopped") and its own internal deprecation warnings are not for the user; its warnings and
    errors still are. Restores the logging levels and warning filters on the way out."""
    loggers = [logging.getLogger(name) for name in ("lightning.pytorch", "lightning.fabric")]
    levels = [logger.level for logger in loggers]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")
        warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")  # on --resume
        for logger in loggers:
            logger.setLevel(logging.WARNING)
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels):
                logger.setLevel(level)

"""What `aiayn train` prints while it trains: one line per validation, and a status line.

On a terminal the status line (step, loss, lr, tokens/s, ETA) is rewritten in place; anywhere
else (a log file, a pipe, CI) a plain line is printed every fifth of the run instead, so the
output stays a few readable lines rather than one carriage-return-joined blob. Each status line
has its own step's numbers, whatever trainer.log_every_n_steps (which paces TensorBoard): the
training loss per target token since the previous line, the learning rate of its step, and
tokens per second of training (validation left out) since the previous line.
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

from aiayn.builder.run.clock import clock
from aiayn.builder.run.rundir import RunDir
from aiayn.builder.train.attributes import callbacks_of
from aiayn.builder.train.board import BPB, PPL
from aiayn.builder.train.callbacks import ValidationTranslations
from aiayn.builder.train.task import TranslationTask, as_task


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
        self._mark: tuple[float, int] = (0.0, 0)  # (time, tokens seen) at the previous status line
        self._validating_since: float | None = None
        self._rate: str | None = None  # tokens per second of the latest interval

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    @property
    def is_enabled(self) -> bool:
        return self._enabled

    # ---- hooks -----------------------------------------------------------------------------

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        task = as_task(pl_module)
        self._start = (time.perf_counter(), trainer.global_step)
        self._mark = (time.perf_counter(), task.tokens_seen)
        if self._enabled:
            resumed = f", resuming at step {trainer.global_step}" if trainer.global_step else ""
            self._line(f"training {task.spec.name}: {trainer.max_steps} steps on {trainer.strategy.root_device.type}{resumed}")

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        task = as_task(pl_module)
        if not self._enabled or self._start is None:
            return
        step = trainer.global_step
        if self.interactive:
            if time.perf_counter() - self._last_draw >= 0.5 or step == trainer.max_steps:
                self._status(self.status(trainer, task))
        elif step % max(trainer.max_steps // 5, 1) == 0 and step != self._printed_step:
            self._line(self.status(trainer, task))
        self._printed_step = step

    def on_validation_start(self, trainer: L.Trainer, task: L.LightningModule) -> None:
        self._validating_since = time.perf_counter()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        task = as_task(pl_module)
        if self._validating_since is not None:  # the tokens per second are training's
            self._mark = (self._mark[0] + time.perf_counter() - self._validating_since, self._mark[1])
            self._validating_since = None
        if self._enabled and not trainer.sanity_checking and self._start is not None:
            self._line(self.validation(trainer, task))

    def on_train_end(self, trainer: L.Trainer, task: L.LightningModule) -> None:
        if self._open_line:
            self._line("")

    # ---- the lines ---------------------------------------------------------------------------

    def status(self, trainer: L.Trainer, task: TranslationTask) -> str:
        parts = [f"step {trainer.global_step}/{trainer.max_steps}"]
        loss = task.take_window_loss()
        if loss is not None:
            parts.append(f"loss {loss:.3f}")
        if task.step_lr is not None:
            parts.append(f"lr {task.step_lr:.2e}")
        now, tokens = time.perf_counter(), task.tokens_seen
        if now > self._mark[0] and tokens > self._mark[1]:
            self._rate = f"{(tokens - self._mark[1]) * trainer.world_size / (now - self._mark[0]) / 1000:.1f}k tok/s"
        self._mark = (now, tokens)
        return "  ".join(parts + self._pace(trainer))

    def validation(self, trainer: L.Trainer, task: TranslationTask) -> str:
        m = trainer.callback_metrics
        parts = [f"step {trainer.global_step}/{trainer.max_steps}  valid"]
        if "loss/valid" in m:
            parts.append(f"loss {float(m['loss/valid']):.3f}  PPL {float(m[PPL]):.2f}")
            if BPB in m:  # a language model's
                parts.append(f"{float(m[BPB]):.3f} bits per byte")
        for bleu in (c for c in callbacks_of(trainer) if isinstance(c, ValidationTranslations) and c.bleu_tag in m):
            parts.append(f"BLEU {float(m[bleu.bleu_tag]):.2f} ({bleu.label})")
        return "  ".join(parts + self._pace(trainer))

    def _pace(self, trainer: L.Trainer) -> list[str]:
        """The latest tokens per second, and the time left at the pace so far (validations included)."""
        t0, step0 = self._start  # type: ignore[misc]
        elapsed, done = time.perf_counter() - t0, trainer.global_step - step0
        if done <= 0 or elapsed <= 0:
            return []
        eta = (trainer.max_steps - trainer.global_step) * elapsed / done
        return [*([self._rate] if self._rate else []), f"ETA {clock(eta)}"]

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


class ProgressFile(L.Callback):
    """progress.json in the run directory (rank 0): the step, max_steps and the ETA at the pace so
    far, rewritten at most every `every_s` seconds and at the last step, for what watches a run
    from outside (a sweep's console, `cat`)."""

    def __init__(self, run: RunDir, *, every_s: float = 5.0) -> None:
        self.run, self.every_s = run, every_s
        self._start: tuple[float, int] | None = None
        self._written = 0.0

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start = (time.perf_counter(), trainer.global_step)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        now = time.perf_counter()
        last = trainer.global_step >= trainer.max_steps
        if self._start is None or not trainer.is_global_zero or (now - self._written < self.every_s and not last):
            return
        t0, step0 = self._start
        done = trainer.global_step - step0
        eta = (trainer.max_steps - trainer.global_step) * (now - t0) / done if done > 0 else None
        self.run.write_progress(trainer.global_step, trainer.max_steps, None if eta is None else round(eta, 1))
        self._written = now


@contextmanager
def quiet_lightning() -> Iterator[None]:
    """While training: Lightning's information lines (devices found, tips, "`Trainer.fit`
    stopped") and its own internal deprecation warnings are not for the user; its warnings and
    errors still are. Restores the logging levels and warning filters on the way out."""
    loggers = [logging.getLogger(name) for name in ("lightning.pytorch", "lightning.fabric")]
    levels = [logger.level for logger in loggers]
    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warning
        warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")
        warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")  # on --resume
        # aiayn logs by optimizer step and prints its own lines, whatever the epoch's length
        warnings.filterwarnings("ignore", message=r"The number of training batches \(\d+\) is smaller than the logging interval")
        # a checkpoint of aiayn 0.1 carries the state of the ModelCheckpoint that StepCheckpoints replaced
        warnings.filterwarnings(
            "ignore", message=r"Be aware that when using `ckpt_path`, callbacks used to create the checkpoint"
        )
        # on a SLURM login node: aiayn's own way onto the cluster is `aiayn sweep --launcher slurm`,
        # and Lightning's hint names `srun python -c ...`, not the command the user ran
        warnings.filterwarnings("ignore", message=r"The `srun` command is available on your system but is not used")
        for logger in loggers:
            logger.setLevel(logging.WARNING)
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels):
                logger.setLevel(level)


def _one_line_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    """A warning as one line, without the framework's file and line."""
    print(f"warning: {' '.join(str(message).split())}", file=sys.stderr)

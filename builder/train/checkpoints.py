"""Checkpoints on their steps: step<N>.ckpt at every multiple of train.checkpoint.every_n_train_steps
(or every_n_minutes), whatever the epoch length, or at the end of every every_n_epochs-th epoch,
and at the final step; last.ckpt is the newest;
the keep_last newest step files are kept.

Lightning's ModelCheckpoint keeps the newest by monitoring `step`, and a monitoring checkpoint
that falls on an epoch's last batch waits for the next validation: with short epochs its files
landed on the validation steps (15, 30 for an interval of 10), and the final step had none. This
callback saves right after the optimizer step that is due, on every rank (a save is collective);
rank 0 makes last.ckpt a second name of it (a hard link, or a copy where there are none) and prunes (Lightning's hpc_ckpt_<n>.ckpt too, which its own SLURM
auto-requeue saves when signalled before a time limit; requeue.py saves a step file instead).
"""

import os
import shutil
import time
from pathlib import Path

import lightning as L

from aiayn.builder.run.atomic import atomic_write
from aiayn.builder.run.rundir import RunDir

STEP_FILENAME = "step{step:08d}"


def link_or_copy(source: Path, target: Path) -> None:
    """`target` becomes `source`'s contents atomically: a second name for the same file (a hard
    link: no second copy on disk, and the file lives on when the step file is pruned), or, on a
    filesystem without hard links, a copy."""
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        temporary.unlink(missing_ok=True)
        os.link(source, temporary)
    except OSError:
        with open(source, "rb") as read, atomic_write(target) as write:
            shutil.copyfileobj(read, write)
        return
    os.replace(temporary, target)


def step_checkpoint_name(step: int) -> str:
    return STEP_FILENAME.format(step=step) + ".ckpt"


class StepCheckpoints(L.Callback):
    def __init__(
        self,
        run: RunDir,
        *,
        every_n_train_steps: int | None,
        every_n_minutes: float | None,
        keep_last: int,
        every_n_epochs: int | None = None,
    ) -> None:
        self.run, self.every, self.minutes, self.keep = run, every_n_train_steps, every_n_minutes, keep_last
        self.epochs = every_n_epochs
        self.saved_step: int | None = None  # the step of the newest checkpoint this process wrote or resumed from
        self._saved_at = time.monotonic()

    def on_train_start(self, trainer: L.Trainer, task: L.LightningModule) -> None:
        self.saved_step, self._saved_at = trainer.global_step, time.monotonic()

    def on_train_batch_end(
        self, trainer: L.Trainer, task: L.LightningModule, outputs: object, batch: object, batch_idx: int
    ) -> None:
        step = trainer.global_step
        if step == self.saved_step:  # no optimizer step since (gradient accumulation), or saved already
            return
        due = self.every is not None and step % self.every == 0
        if self.minutes is not None:  # rank 0's clock decides: every rank must join the save
            due = trainer.strategy.broadcast(due or time.monotonic() - self._saved_at >= 60 * self.minutes)
        if due:
            self.save(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, task: L.LightningModule) -> None:
        """An epoch's last batch has made its optimizer step (Lightning steps at an epoch's end
        under gradient accumulation too), and its validation, if any, is done."""
        if self.epochs is not None and (trainer.current_epoch + 1) % self.epochs == 0 and trainer.global_step != self.saved_step:
            self.save(trainer)

    def save(self, trainer: L.Trainer) -> None:
        """step<N>.ckpt of the current step, last.ckpt its copy, the keep_last newest step files kept."""
        step = trainer.global_step
        path = self.run.checkpoints / step_checkpoint_name(step)
        trainer.save_checkpoint(path)
        if trainer.is_global_zero:
            link_or_copy(path, self.run.last_checkpoint)
            for old in [*self.run.step_checkpoints()[: -self.keep], *self.run.hpc_checkpoints()]:
                old.unlink(missing_ok=True)  # a step file supersedes the save before a time limit
        trainer.strategy.barrier("StepCheckpoints.save")
        self.saved_step, self._saved_at = step, time.monotonic()

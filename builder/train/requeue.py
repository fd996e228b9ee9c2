"""Before a SLURM time limit: a step checkpoint at the next step's end, then a requeue.

SLURM signals a job some time before its limit (sbatch --signal=USR1@T; the sweep launcher's
signal_delay_s). Lightning's own auto-requeue saves inside whatever moment the signal lands in:
its loop counters, the data position and the RNG then stand mid-step, and a run resumed from
there trains on, but not along the path it was on. Here the signal only raises a flag; at the end
of the optimizer step it lands in, every rank agrees (any rank signalled), the step's checkpoint
is written (a step<N>.ckpt like any other, which resumes bit for bit) and rank 0 asks SLURM to
requeue the job. Training goes on until SLURM's SIGTERM ends it; the requeued job resumes from
that checkpoint (`--run-dir`: the newest step file). A signal that lands before the fit starts
(in `aiayn train`'s start-up) is remembered (builder/run/time_limit.py) and answered at the end
of the first step.
"""

import os
import signal
import subprocess
import threading
from typing import Any

import lightning as L

from aiayn.builder.run.time_limit import SIGNAL, in_slurm_job, take_remembered_signal
from aiayn.builder.train.checkpoints import StepCheckpoints

__all__ = ["SIGNAL", "RequeueAtStepEnd", "in_slurm_job", "slurm_job_id"]


def slurm_job_id() -> str | None:
    """`<array job>_<task>` for a task of a job array, else the job's id."""
    array_job, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{array_job}_{task}" if array_job and task else os.environ.get("SLURM_JOB_ID")


class RequeueAtStepEnd(L.Callback):
    """Takes SIGUSR1 for the Trainer's fit; see the module's docstring. Put it after StepCheckpoints
    (a step it has saved already is not saved again)."""

    def __init__(self, checkpoints: StepCheckpoints) -> None:
        self.checkpoints = checkpoints
        self.signalled = False  # this process has received the signal
        self.requeued_at: int | None = None  # the step whose checkpoint came before the requeue
        self._previous: Any = None
        self._step = 0  # the global step at the previous batch's end: a batch that moves it ends a step

    def setup(self, trainer: L.Trainer, task: L.LightningModule, stage: str) -> None:
        if stage == "fit" and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(SIGNAL, self._handler)
            # a signal that landed in the start-up (the CLI remembered it) is answered at the first step's end
            self.signalled = self.signalled or take_remembered_signal()

    def teardown(self, trainer: L.Trainer, task: L.LightningModule, stage: str) -> None:
        if stage == "fit" and self._previous is not None:
            signal.signal(SIGNAL, self._previous)
            self._previous = None

    def on_train_start(self, trainer: L.Trainer, task: L.LightningModule) -> None:
        self._step = trainer.global_step

    def _handler(self, signum: int, frame: Any) -> None:
        self.signalled = True  # no I/O in a signal handler: the step's end does the work

    def on_train_batch_end(self, trainer: L.Trainer, task: L.LightningModule, outputs: Any, batch: Any, batch_idx: int) -> None:
        step, ended = trainer.global_step, trainer.global_step != self._step  # not inside a gradient accumulation
        self._step = step
        if not ended or self.requeued_at is not None:
            return
        if not trainer.strategy.reduce_boolean_decision(self.signalled, all=False):  # any rank's signal
            return
        if self.checkpoints.saved_step != step:
            self.checkpoints.save(trainer)
        self.requeued_at = step
        if trainer.is_global_zero:
            job = slurm_job_id()
            print(f"SLURM's time-limit signal: saved step {step}, requeueing job {job}", flush=True)
            if job is not None:
                subprocess.run(["scontrol", "requeue", job], check=False)

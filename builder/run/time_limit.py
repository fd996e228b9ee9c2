"""SLURM's time-limit signal (USR1), remembered from a training process's first moment.

SLURM signals a job some time before its limit (sbatch --signal=USR1@T). Its default action ends
the process; the Trainer's callback (builder/train/requeue.py) takes it only once the fit has
started, after PyTorch and Lightning are imported and the data and model are built: on a busy
machine, tens of seconds. A signal landing in that start-up killed the trial (exit -10) instead
of saving and requeueing it. So the CLI, before it imports anything heavy, installs a handler that
only remembers the signal; the callback takes the remembered signal over and answers it at the end
of the first step. Nothing here imports torch.
"""

import os
import signal
import threading
from collections.abc import Mapping
from typing import Any

SIGNAL = signal.SIGUSR1


def in_slurm_job(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether Lightning takes this process for a task of a SLURM job (SLURMEnvironment.detect's
    rule: SLURM_NTASKS set, in a job not named bash or interactive)."""
    return "SLURM_NTASKS" in environ and environ.get("SLURM_JOB_NAME") not in ("bash", "interactive")


class _Remembered:
    signalled = False  # a plain attribute: a signal handler must not take locks


def _remember(signum: int, frame: Any) -> None:
    _Remembered.signalled = True


def remember_time_limit_signal() -> None:
    """In a SLURM task's main thread: from now on, the time-limit signal is remembered, not fatal."""
    if in_slurm_job() and threading.current_thread() is threading.main_thread():
        signal.signal(SIGNAL, _remember)


def take_remembered_signal() -> bool:
    """Whether the signal came before now (since `remember_time_limit_signal`); forgets it."""
    signalled, _Remembered.signalled = _Remembered.signalled, False
    return signalled

"""How many threads a CPU run uses: train.cpu_threads, or for auto the cores other processes
leave free, looked at again every few seconds while it trains (builder/run/cpu.py says why).

PyTorch's CPU kernels split work over threads that wait for each other: beside another busy
process, every step waits for the slowest thread, and a run with all threads was 10-20 times
slower than with one. A run that takes only the free cores, and gives them back to a process
that starts later, degrades to its fair share instead."""

import lightning as L
import torch

from aiayn.builder.errors import UserError
from aiayn.builder.run.cpu import CpuTimes, auto_threads, threads_beside, usable_cores

OPTION = "train.cpu_threads"
EVERY_S = 5.0  # how often a training on auto threads looks at the other processes again


def cpu_threads(setting: int | str, *, processes_here: int = 1) -> int:
    """The setting, or for auto: $OMP_NUM_THREADS where set, else the usable cores that other
    processes leave free, shared among this machine's processes of the run."""
    check_cpu_threads(setting)
    return int(setting) if setting != "auto" else auto_threads(processes_here=processes_here)


def check_cpu_threads(setting: int | str) -> None:
    """More threads than cores only makes each step wait for threads that share a core (and
    OpenMP aborts the process on absurd counts): refused before anything runs."""
    cores = usable_cores()
    if setting != "auto" and int(setting) > cores:
        raise UserError(
            f"{OPTION} ({setting}) is more than the {cores} cores this process may use; set it to at most {cores}, or to auto"
        )


def threads_note(threads: int, *, processes_here: int = 1) -> str | None:
    """One line when a run on auto threads starts with fewer than its share of the cores."""
    share = max(1, usable_cores() // max(1, processes_here))
    if threads >= share:
        return None
    return (
        f"cpu: {threads} of {share} threads: other processes keep the rest of the cores busy; looked at again every "
        f"{EVERY_S:g} s ({OPTION}=N holds the count at N, as a run that must repeat bit for bit needs)"
    )


class AdaptiveThreads(L.Callback):
    """train.cpu_threads: auto on a CPU: every EVERY_S seconds, the threads become the cores that
    the other processes left free since the last look (a later run, a test suite, TensorBoard),
    so that two runs side by side each take their share, and one takes all once alone again."""

    def __init__(self, *, every_s: float = EVERY_S) -> None:
        self.every_s, self.threads, self.cores = every_s, 0, 1
        self._last: CpuTimes | None = None

    def on_train_start(self, trainer: L.Trainer, task: L.LightningModule) -> None:
        if trainer.strategy.root_device.type == "cpu":  # on a GPU the CPU's threads hardly matter
            self.threads, self.cores = torch.get_num_threads(), max(1, usable_cores() // max(1, len(trainer.device_ids)))
            self._last = CpuTimes.now()

    def on_train_batch_end(
        self, trainer: L.Trainer, task: L.LightningModule, outputs: object, batch: object, batch_idx: int
    ) -> None:
        if self._last is None:
            return
        now = CpuTimes.now()
        if now is None or now.wall - self._last.wall < self.every_s:
            return
        threads = threads_beside(now.others_since(self._last), self.cores)
        self._last = now
        if threads != self.threads:
            self.threads = threads
            torch.set_num_threads(threads)

"""Sharing a machine's cores with other processes: how threads wait, and how many to use.

PyTorch's CPU kernels run on OpenMP threads (GNU libgomp in its Linux wheels). Between parallel
regions, libgomp's idle threads spin by default (300,000 turns of a busy loop), burning cores
that another process wants: two demo trainings side by side took 2.9x as long as one alone, three
8.1x (issue 34's measurement), where a fair share costs 2x and 3x. libgomp reads its environment
once, when torch loads it, so the CLI sets `quiet_waits` before it imports torch; each verb that
runs torch then takes the cores other processes leave free (`free_cores`), and a training looks
again every few seconds (builder/train/threads.py).
"""

import os
import time
from collections.abc import MutableMapping
from dataclasses import dataclass

# What the CLI sets when the user has set neither (a user's value always wins): threads that wait
# for work sleep after a short spin instead of spinning on (benchmarks/sharing.py measures it).
WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
QUIET_WAITS = {"OMP_WAIT_POLICY": "PASSIVE"}


def quiet_waits(environ: MutableMapping[str, str]) -> None:
    """Set QUIET_WAITS in `environ` (before torch is imported, and for the processes it starts)
    unless the user set how OpenMP threads wait."""
    if not any(name in environ for name in WAIT_VARIABLES):
        environ.update(QUIET_WAITS)


def usable_cores() -> int:
    """The cores this process may run on (its affinity), else the machine's."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@dataclass(frozen=True)
class CpuTimes:
    """The machine's busy CPU seconds, this process's CPU seconds, and the wall clock, at one instant."""

    busy: float
    own: float
    wall: float

    @classmethod
    def now(cls) -> "CpuTimes | None":
        """None where /proc/stat cannot be read (not Linux): nothing is known of other processes."""
        try:
            with open("/proc/stat") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        # user nice system idle iowait irq softirq steal ...: all but idle and iowait is busy
        busy = sum(fields[:3]) + sum(fields[5:8])
        return cls(busy / os.sysconf("SC_CLK_TCK"), time.process_time(), time.monotonic())

    def others_since(self, before: "CpuTimes") -> float:
        """The cores that other processes kept busy, on average, since `before`."""
        wall = self.wall - before.wall
        if wall <= 0:
            return 0.0
        return max(0.0, (self.busy - before.busy) - (self.own - before.own)) / wall


def fixed_share() -> int | None:
    """$OMP_NUM_THREADS where set (a sweep's share of the cores, or the user's), else None."""
    given = os.environ.get("OMP_NUM_THREADS", "")
    return int(given) if given.isdigit() and int(given) > 0 else None


def auto_threads(*, processes_here: int = 1) -> int:
    """Threads for a process of aiayn's on a CPU: $OMP_NUM_THREADS where set, else the usable
    cores that other processes leave free, shared among this machine's `processes_here`."""
    return fixed_share() or free_cores(cores=max(1, usable_cores() // max(1, processes_here)))


def free_cores(*, sample_s: float = 0.25, cores: int | None = None) -> int:
    """The usable cores that other processes leave free, measured over `sample_s` seconds (at
    least 1; all of them where it cannot be measured)."""
    cores = cores or usable_cores()
    before = CpuTimes.now()
    if before is None:
        return cores
    time.sleep(sample_s)
    after = CpuTimes.now()
    return threads_beside(after.others_since(before) if after else 0.0, cores)


def threads_beside(others: float, cores: int) -> int:
    """Threads for a process beside others that keep `others` cores busy: the free cores, where a
    core counts as taken once another process uses most of it (above 0.6 of it: a short burst,
    TensorBoard's reading say, does not halve a run), at least 1."""
    return max(1, min(cores, cores - int(others + 0.4)))

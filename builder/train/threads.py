"""How many threads a CPU run uses, and a word when the machine is already busy.

PyTorch's CPU kernels split work over threads that wait for each other; when another process
keeps the cores busy, every step waits for the slowest thread, and a run can be 10-20 times
slower with all threads than with one (measured: 4 s against 82-100 s beside another run)."""

import os

OPTION = "train.cpu_threads"


def usable_cores() -> int:
    """The cores this process may run on (its affinity), else the machine's."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def cpu_threads(setting: int | str, *, processes_here: int = 1) -> int:
    """The setting, or for auto: $OMP_NUM_THREADS where set (a sweep's share of the cores),
    else the usable cores shared among this machine's processes of the run."""
    if setting != "auto":
        return int(setting)
    given = os.environ.get("OMP_NUM_THREADS", "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    return max(1, usable_cores() // max(1, processes_here))


def busy_note(threads: int) -> str | None:
    """One line when the machine's load already exceeds its cores and the run would add threads
    to it, naming the option; None otherwise."""
    if threads <= 1 or not hasattr(os, "getloadavg"):
        return None
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load <= cores:
        return None
    return (
        f"note: this machine's load ({load:.1f}) already exceeds its {cores} cores, so {threads} threads will wait on "
        f"each other; beside another busy process a CPU run is often many times faster with {OPTION}=1"
    )

"""What SLURM says of a sweep's jobs, and how a trial's process behaves inside a SLURM job.

submitit learns job states from `sacct`, which needs the cluster's accounting database
(slurmdbd); on a cluster without one, sacct has no records and a job that ended without a
result (cancelled, requeued, killed at its time limit) would be waited for forever. The
launcher asks here instead: sacct where it answers, else slurmctld itself (`scontrol show
job`, which keeps an ended job for MinJobAge seconds, 300 by default).
"""

import os
import signal
import subprocess
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

# a job in one of these states has not ended (squeue's list); any other state is final
ACTIVE = frozenset({
    "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
    "RESIZING", "SUSPENDED", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD",
})  # fmt: skip


def expand_ids(field: str, array_id: str | None = None) -> list[str]:
    """Job ids as SLURM lists them, one per array task: "12_[0-2%1]" (sacct), or an
    ArrayTaskId "0-2%1" or "1,3" of array 12 (scontrol) -> 12_0, 12_1, 12_2."""
    if array_id is None:
        if not field.endswith("]") or "_[" not in field:
            return [field]
        array_id, _, field = field[:-1].partition("_[")
    ids = []
    for part in field.split("%")[0].split(","):
        first, _, last = part.partition("-")
        if not first.isdigit():
            continue
        ids += [f"{array_id}_{i}" for i in range(int(first), int(last or first) + 1)]
    return ids


def parse_sacct(text: str) -> dict[str, str]:
    """`sacct -X -n -P -o JobID,State` -> {job id: state} ("CANCELLED by 0" -> CANCELLED)."""
    states = {}
    for line in text.splitlines():
        job_id, _, state = line.partition("|")
        for one in expand_ids(job_id.strip()):
            states[one] = state.split()[0] if state.split() else "UNKNOWN"
    return states


def parse_scontrol(text: str) -> dict[str, str]:
    """`scontrol show job -o` (one job per line) -> {job id: state}."""
    states = {}
    for line in text.splitlines():
        fields = dict(item.partition("=")[::2] for item in line.split())
        if "JobId" not in fields:
            continue
        state = fields.get("JobState", "UNKNOWN")
        array_id, task = fields.get("ArrayJobId"), fields.get("ArrayTaskId")
        for one in expand_ids(task, array_id) if array_id and task else [fields["JobId"]]:
            states[one] = state
    return states


def slurm_states(job_ids: Iterable[str]) -> dict[str, str]:
    """SLURM's state of each job it still knows; a job it does not know is left out."""
    job_ids = sorted(set(job_ids))
    if not job_ids:
        return {}
    sacct = _call(["sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", ",".join(job_ids)])
    states = parse_sacct(sacct) if sacct else {}
    missing = [j for j in job_ids if j not in states]
    for array_id in sorted({j.split("_")[0] for j in missing}):  # no accounting: ask slurmctld
        states = {**parse_scontrol(_call(["scontrol", "show", "job", "-o", array_id]) or ""), **states}
    return {j: states[j] for j in job_ids if j in states}


def _call(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


@contextmanager
def slurm_task() -> Iterator[threading.Event | None]:
    """Inside a SLURM job's task (submitit's process, its main thread), around the trial's process.

    The signal that comes before the time limit (USR1) is the trial's: it saves its step and
    requeues the job (builder/train/requeue.py). This process must outlive it, so it takes USR1
    with a Python handler (an exec resets that to the default, so the trial installs its own).
    A SIGTERM means SLURM ends this job (scancel, or a requeue): the event is set, so that the
    trial's interruption is not reported as its result.

    On leaving, USR1 stays ignored: a time-limit signal that lands after the trial ended (while
    submitit writes its result) must not kill this process (USR1's default action), or a trial that
    finished would be reported as a job that FAILED with no result."""
    if "SLURM_JOB_ID" not in os.environ or threading.current_thread() is not threading.main_thread():
        yield None
        return
    ended = threading.Event()
    previous_term = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGUSR1, lambda *_: None)
    signal.signal(signal.SIGTERM, lambda *_: ended.set())
    try:
        yield ended
    finally:
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, previous_term)

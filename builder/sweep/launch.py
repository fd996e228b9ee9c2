"""Running trials: each is one `python -m aiayn train ... --run-dir DIR` process, started by
a local pool (N at a time, each with its own GPUs) or as a SLURM job through submitit."""

import contextlib
import dataclasses
import io
import os
import queue
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiayn.builder.errors import UserError
from aiayn.builder.sweep.slurm import ACTIVE, slurm_states, slurm_task
from aiayn.schemas.sweep import LocalLauncherSpec, SlurmLauncherSpec

ERROR_LINES = 20  # of a failed trial's stderr, kept in sweep.json
ENDED_WAIT_S = 300  # a job SLURM ends is killed within its KillWait (30 s by default)
POLL_S = 2.0  # seconds between two looks at the SLURM jobs of a sweep


@dataclass(frozen=True)
class Job:
    """One trial's process. Picklable: submitit ships it to the cluster's nodes."""

    name: str
    argv: tuple[str, ...]
    run_dir: Path
    cwd: str


@dataclass(frozen=True)
class Outcome:
    returncode: int | None  # None: the process never ran or its job died (see error)
    wall_time_s: float
    error: str | None  # the last lines of stderr, or why the job died
    slurm_state: str | None = None  # SLURM's final state of the trial's job (COMPLETED, CANCELLED, ...)


Done = Callable[[Job, Outcome], None]


def trial_argv(experiment: Path, overrides: Sequence[str], run_dir: Path) -> tuple[str, ...]:
    return (sys.executable, "-m", "aiayn", "train", str(experiment), *overrides, "--run-dir", str(run_dir))


def launcher_overrides(launcher: LocalLauncherSpec | SlurmLauncherSpec) -> list[str]:
    """Where a trial runs: not part of its config hash, since a result does not depend on it."""
    out = ["trainer.enable_progress_bar=false"]  # logs go to files; a progress bar there is noise
    if isinstance(launcher, LocalLauncherSpec):
        gpus = launcher.gpus_per_trial
        if gpus == 0:
            out += ["trainer.accelerator=cpu", "trainer.devices=1"]
        elif gpus:
            out += ["trainer.accelerator=gpu", f"trainer.devices={gpus}"]
    else:
        accelerator = "gpu" if launcher.gpus_per_node else "cpu"
        out += [f"trainer.accelerator={accelerator}", f"trainer.devices={launcher.tasks}", f"trainer.num_nodes={launcher.nodes}"]
    return out


def run_job(job: Job, env: dict[str, str] | None = None, defaults: dict[str, str] | None = None) -> Outcome:
    """Run the trial's process with `env` set and `defaults` where the environment lacks them,
    its output appended to stdout.log and stderr.log in its run directory (rank k > 0 of a SLURM
    job: stdout.rank<k>.log ...). In a job that SLURM ends (scancel, requeue), the trial stops
    and this process waits to be killed: no result is written, and a requeued job runs the trial
    again, which resumes from its checkpoint."""
    with slurm_task() as ended:
        outcome = _run_trial(job, env, defaults)
        if ended is not None and ended.is_set():
            time.sleep(ENDED_WAIT_S)  # SLURM kills this process KillWait seconds after its SIGTERM
    return outcome


def _run_trial(job: Job, env: dict[str, str] | None, defaults: dict[str, str] | None) -> Outcome:
    rank = os.environ.get("SLURM_PROCID", "0")
    suffix = "" if rank == "0" else f".rank{rank}"
    job.run_dir.mkdir(parents=True, exist_ok=True)
    err_path = job.run_dir / f"stderr{suffix}.log"
    start = time.perf_counter()
    with open(job.run_dir / f"stdout{suffix}.log", "ab") as out, open(err_path, "ab") as err:
        offset = err.tell()
        try:
            code = subprocess.run(
                job.argv,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                cwd=job.cwd,
                # the folder it runs in is not on its import path: a clone's own aiayn/ folder there
                # would hide the installed package (Python 3.11's PYTHONSAFEPATH; DDP's processes inherit it)
                env={"PYTHONSAFEPATH": "1", **(defaults or {}), **os.environ, **(env or {})},
            ).returncode
        except OSError as e:
            return Outcome(None, time.perf_counter() - start, f"could not start {job.argv[0]}: {e}")
    wall = time.perf_counter() - start
    if code == 0:
        return Outcome(0, wall, None)
    with open(err_path, "rb") as f:
        f.seek(offset)
        lines = [line for line in f.read().decode(errors="replace").splitlines() if line.strip()]
    return Outcome(code, wall, "\n".join(lines[-ERROR_LINES:]) or f"exit code {code}, nothing on stderr")


# ---- local -------------------------------------------------------------------------------


def visible_gpus() -> list[str]:
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is not None:
        return [g.strip() for g in value.split(",") if g.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def gpu_slots(k: int, gpus: Sequence[str]) -> list[tuple[str, ...]]:
    """Disjoint groups of k GPUs; a remainder smaller than k stays idle."""
    if len(gpus) < k:
        raise UserError(
            f"launcher.gpus_per_trial is {k} but {len(gpus)} GPU(s) are visible "
            f"({', '.join(gpus) or 'none'}); lower gpus_per_trial, or set it to 0 to train on CPU"
        )
    return [tuple(gpus[i * k : (i + 1) * k]) for i in range(len(gpus) // k)]


def check(launcher: LocalLauncherSpec | SlurmLauncherSpec) -> None:
    """Refuse a launcher that cannot start here, before any run directory is made."""
    if isinstance(launcher, LocalLauncherSpec):
        if launcher.gpus_per_trial:
            gpu_slots(launcher.gpus_per_trial, visible_gpus())
    elif launcher.cluster == "slurm" and shutil.which("sbatch") is None:
        raise UserError(
            "the slurm launcher needs `sbatch` on PATH; run `aiayn sweep` on a SLURM login node, "
            "or set sweep.launcher.cluster=local to run the jobs on this machine through submitit"
        )
    elif launcher.cluster == "slurm":
        _check_controller()


class LauncherFailed(UserError):
    """The launcher could not start the sweep's jobs (none of them runs): its own message."""


def _check_controller() -> None:
    """SLURM's controller answers (`sinfo`, which asks slurmctld): else sbatch would fail at the
    first submission, after the trials' folders were made."""
    if shutil.which("sinfo") is None:
        return  # sbatch alone: its own failure is reported at submission
    try:
        done = subprocess.run(["sinfo", "--noheader", "--format=%P"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        reason = "it did not answer within 60 s" if isinstance(e, subprocess.TimeoutExpired) else str(e)
    else:
        if done.returncode == 0:
            return
        reason = _last_words(done.stderr) or f"exit {done.returncode}"
    raise LauncherFailed(
        f"the slurm launcher cannot reach SLURM's controller: `sinfo` says: {reason}; is slurmctld up (`scontrol ping`)? "
        "Nothing was submitted or written; run the sweep again once it answers, or set sweep.launcher.cluster=local"
    )


def _last_words(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def local_runner(launcher: LocalLauncherSpec, *, gpus: Sequence[str] | None = None) -> tuple[Callable[..., Outcome], int]:
    """(run(job, env=None): run a job with `env` added, how many may run at once): with
    gpus_per_trial k, a job holds k GPUs (a slot of the pool, shared by at most
    launcher.trials_per_gpu jobs) while it runs."""
    k = launcher.gpus_per_trial
    slots: queue.Queue[tuple[str, ...]] = queue.Queue()
    workers = launcher.parallel
    if k:
        for slot in gpu_slots(k, visible_gpus() if gpus is None else gpus):
            for _ in range(launcher.trials_per_gpu):  # a slot taken by up to trials_per_gpu trials
                slots.put(slot)
        workers = min(workers, slots.qsize())

    # as torchrun does: trials running at once share the cores instead of oversubscribing them
    threads = {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // workers))}

    def run(job: Job, extra: dict[str, str] | None = None) -> Outcome:
        slot = slots.get() if k else None
        try:
            env = {"CUDA_VISIBLE_DEVICES": ",".join(slot)} if slot else {"CUDA_VISIBLE_DEVICES": ""} if k == 0 else {}
            return run_job(job, {**env, **(extra or {})}, threads)
        finally:
            if slot:
                slots.put(slot)

    return run, workers


def launch_local(jobs: Sequence[Job], launcher: LocalLauncherSpec, on_done: Done, *, gpus: Sequence[str] | None = None) -> None:
    """`launcher.parallel` jobs at a time (see local_runner)."""
    run, workers = local_runner(launcher, gpus=gpus)
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        for future in [pool.submit(lambda job: on_done(job, run(job)), job) for job in jobs]:
            future.result()
    finally:  # on Ctrl-C the running trials stop too (same process group); start no more
        pool.shutdown(wait=True, cancel_futures=True)


# ---- SLURM (submitit) --------------------------------------------------------------------


def launch_slurm(
    jobs: Sequence[Job],
    launcher: SlurmLauncherSpec,
    folder: Path,
    on_done: Done,
    *,
    name: str,
    on_submit: Callable[[Job, str], None] | None = None,
) -> None:
    """One job array, a task per trial, submitted through submitit and waited for. Each job is
    requeueable and signalled (USR1) signal_delay_s before its time limit, when the trial saves its
    step and requeues its job (builder/train/requeue.py)."""
    import submitit

    check(launcher)
    submitted = _submit(jobs, launcher, folder, name)
    by_id = {}
    for job, handle in zip(jobs, submitted):
        by_id[handle.job_id] = job
        if on_submit:
            on_submit(job, handle.job_id)
    try:
        if launcher.cluster == "slurm":
            ended = ended_slurm(submitted)
        else:  # submitit's local executor: its processes leave a result whatever happens
            ended = ((h, None) for h in submitit.helpers.as_completed(submitted, poll_frequency=POLL_S))
        for handle, state in ended:
            on_done(by_id[handle.job_id], outcome_of(handle, state))
    except KeyboardInterrupt:
        running = [h.job_id for h in submitted if not h.paths.result_pickle.exists()]
        if running and launcher.cluster == "slurm":
            print(
                f"the SLURM jobs {' '.join(running)} keep running: `scancel {' '.join(running)}` stops them; "
                "re-run the sweep once they are done, or it submits them again",
                file=sys.stderr,
            )
        raise


def _submit(jobs: Sequence[Job], launcher: SlurmLauncherSpec, folder: Path, name: str) -> list[Any]:
    """The jobs submitted as one array (submitit's handles); a launcher that cannot submit them is
    a LauncherFailed with its own words (none of them was submitted)."""
    import submitit

    try:
        executor = submitit.AutoExecutor(folder=folder / "%j", cluster=launcher.cluster)
    except RuntimeError as e:  # submitit's own check of the cluster ("Could not detect srun")
        raise LauncherFailed(
            f"the {launcher.cluster} launcher cannot start: submitit says: {_last_words(str(e))}; nothing was submitted"
        ) from None
    executor.update_parameters(**slurm_parameters(launcher, name=name))
    try:  # submitit prints sbatch's stderr before it raises: the message below says it once
        with contextlib.redirect_stderr(io.StringIO()), executor.batch():
            return [executor.submit(run_job, job, None, {"OMP_NUM_THREADS": str(launcher.cpus_per_task)}) for job in jobs]
    except (submitit.core.utils.FailedJobError, OSError) as e:  # sbatch's refusal: its stderr is the message
        reason = _last_words(str(e)) or type(e).__name__
        raise LauncherFailed(
            f"the {launcher.cluster} launcher could not submit the sweep's jobs: {reason}; nothing was submitted"
        ) from None


def slurm_parameters(launcher: SlurmLauncherSpec, *, name: str) -> dict[str, Any]:
    """submitit's parameters for the launcher's jobs: requeueable, signalled (USR1)
    signal_delay_s before the time limit, a task per device."""
    params: dict[str, Any] = dict(
        name=name,
        timeout_min=launcher.timeout_min,
        nodes=launcher.nodes,
        gpus_per_node=launcher.gpus_per_node,
        tasks_per_node=launcher.tasks,  # a task per device: Lightning reads its rank from SLURM
        cpus_per_task=launcher.cpus_per_task,
        mem_gb=launcher.mem_gb,
    )
    if launcher.cluster == "slurm":
        params.update(
            slurm_partition=launcher.partition,
            slurm_array_parallelism=launcher.array_parallelism,
            slurm_additional_parameters={"signal": f"USR1@{launcher.signal_delay_s}", "requeue": True, **launcher.additional},
            slurm_setup=list(launcher.setup) or None,
        )
    return {k: v for k, v in params.items() if v is not None}


def ended_slurm(handles: Sequence[Any]) -> Iterator[tuple[Any, str | None]]:
    """(handle, SLURM's final state) of each job as it ends, whether or not it left a result:
    a job that SLURM no longer knows (purged) has ended when it left its result."""
    pending = {h.job_id: h for h in handles}
    while pending:
        states = slurm_states(pending)
        for job_id, handle in list(pending.items()):
            state = states.get(job_id)
            if state in ACTIVE or state is None and not handle.paths.result_pickle.exists():
                continue
            del pending[job_id]
            yield handle, state
        if pending:
            time.sleep(POLL_S)


def outcome_of(handle: Any, state: str | None) -> Outcome:
    if not handle.paths.result_pickle.exists() and state is not None:
        return Outcome(None, 0.0, f"SLURM job {handle.job_id} ended {state}, with no result", state)
    try:
        return dataclasses.replace(handle.result(), slurm_state=state)
    except Exception as e:  # the job died (timeout, node failure): submitit says why
        lines = [line for line in str(e).splitlines() if line.strip()]
        return Outcome(None, 0.0, f"SLURM job {handle.job_id} failed: " + "\n".join(lines[-ERROR_LINES:]), state)

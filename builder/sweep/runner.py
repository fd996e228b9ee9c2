"""`aiayn sweep`: plan the trials, skip the finished ones, launch the rest, record every outcome
in sweep.json, then write the results table of the sweep's directory.

`plan_sweep` decides and dry_run.py's `render_plan` describes; `run_sweep` is the shell that writes,
launches and prints.
"""

import datetime
import shutil
import threading
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiayn.builder.decode.checkpoint import load_source_model
from aiayn.builder.errors import UserError
from aiayn.builder.plugins import default_registry
from aiayn.builder.registry import Registry
from aiayn.builder.run.atomic import write_json
from aiayn.builder.run.outputs import hold_run, release_run
from aiayn.builder.run.rundir import RunDir, final_scores
from aiayn.builder.sweep.dry_run import render_plan
from aiayn.builder.sweep.launch import (
    Job,
    LauncherFailed,
    Outcome,
    check,
    launch_local,
    launch_slurm,
    launcher_overrides,
    trial_argv,
)
from aiayn.builder.sweep.plan import TRIAL_FILE, Trial, TrialState, expand, load_sweep, split_overrides, state, write_trial_record
from aiayn.builder.sweep.progress import TrialLines
from aiayn.builder.sweep.search import check_search
from aiayn.schemas.sweep import LocalLauncherSpec, SlurmLauncherSpec, SweepSpec


class SweepFailed(UserError):
    """Some trials failed; the others ran. Exit 1, as `aiayn train` failing would."""

    exit_code = 1


@dataclass(frozen=True)
class Plan:
    sweep: SweepSpec
    path: Path
    directory: Path  # runs/<sweep name>
    trials: list[Trial]
    states: list[TrialState]
    registry: Registry  # what the trials' experiments are read with


def plan_sweep(
    path: str | Path,
    overrides: typing.Sequence[str],
    runs: str | Path,
    tuned: dict[str, list[str]] | None = None,
    *,
    registry: Registry | None = None,
) -> Plan:
    registry = registry if registry is not None else default_registry()
    path = Path(path)
    sweep_overrides, trial_overrides = split_overrides(overrides)
    sweep = load_sweep(path, sweep_overrides)
    trials = expand(sweep, path, trial_overrides, tuned, registry=registry)
    directory = Path(runs) / sweep.name
    return Plan(sweep, path, directory, trials, [state(t, directory, registry) for t in trials], registry)


class SweepRecord:
    """sweep.json: the sweep's trials and what became of each, rewritten as they finish."""

    def __init__(self, plan: Plan) -> None:
        self.path = plan.directory / "sweep.json"
        self.lock = threading.Lock()
        self.data: dict[str, Any] = {
            "name": plan.sweep.name,
            "sweep_file": str(plan.path),
            "base": str(plan.path.parent / plan.sweep.base),  # the experiment of the variants that name none: ΔBLEU's base
            "launcher": plan.sweep.launcher.model_dump(mode="json"),
            **(
                {"search": plan.sweep.search.model_dump(mode="json"), "trial_seed": plan.sweep.trial_seed}
                if plan.sweep.search
                else {}
            ),
            "started_at": _now(),
            "finished_at": None,
            "trials": [],
        }
        self.index: dict[str, dict[str, Any]] = {}

    def add(self, trial: Trial, run_dir: Path, status: str, **fields: Any) -> None:
        entry = {
            "name": trial.name,
            "variant": trial.variant,
            "seed": trial.seed,
            "experiment": str(trial.experiment),
            "overrides": list(trial.overrides),
            "config_hash": trial.config_hash,
            "run_dir": str(run_dir),
            "status": status,
            **fields,
        }
        self.data["trials"].append(entry)
        self.index[trial.name] = entry

    def update(self, name: str, **fields: Any) -> None:
        with self.lock:
            self.index[name].update(fields)
            self.write()

    def finish(self) -> None:
        self.data["finished_at"] = _now()
        self.write()

    def write(self) -> None:
        write_json(self.path, self.data)


def _now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def prepare(plan: Plan) -> tuple[SweepRecord, list[Job]]:
    """sweep.json with every trial, and a job (its run directory and trial.json made) for each
    trial that is not finished."""
    record = SweepRecord(plan)
    extra = launcher_overrides(plan.sweep.launcher)
    jobs = []
    for trial, st in zip(plan.trials, plan.states):
        if st.action == "skip":
            results = RunDir(st.run_dir).results() or {}
            record.add(trial, st.run_dir, "skipped", bleu=results.get("bleu"), ppl=results.get("ppl"))
            continue
        record.add(trial, st.run_dir, "queued")
        st.run_dir.mkdir(parents=True, exist_ok=True)
        write_trial_record(trial, st.run_dir)
        argv = trial_argv(trial.experiment, [*trial.overrides, *extra], st.run_dir)
        jobs.append(Job(trial.name, argv, st.run_dir, str(Path.cwd())))
    record.write()
    return record, jobs


class Reporter:
    """Prints and records each trial's outcome as it arrives (from the launcher's threads)."""

    def __init__(self, record: SweepRecord, total: int, lines: TrialLines | None = None) -> None:
        self.record, self.total, self.done = record, total, 0
        self.failed: list[str] = []
        self.lines = lines  # the running trials' lines, which the ended trials' go above

    def __call__(self, job: Job, outcome: Outcome) -> None:
        run = RunDir(job.run_dir)
        results = run.results()
        with self.record.lock:
            self.done += 1
            count = f"[{self.done}/{self.total}]"
        wall = round(outcome.wall_time_s, 1)
        slurm = {"slurm_state": outcome.slurm_state} if outcome.slurm_state else {}
        if results is not None:
            self.record.update(
                job.name,
                status="finished",
                returncode=outcome.returncode,
                wall_time_s=wall,
                bleu=results["bleu"],
                ppl=results["ppl"],
                **slurm,
            )
            self._say(f"{count} {job.name}: finished in {_durations(outcome, results)}: {final_scores(results)}", job)
            return
        error = outcome.error if outcome.returncode != 0 else f"exited 0 without results.json: {_unfinished_reason(run)}"
        status = "cancelled" if outcome.slurm_state == "CANCELLED" else "failed"
        if status == "cancelled":
            error = f"{error}; {_unfinished_reason(run)}"
        self.failed.append(job.name)
        self.record.update(
            job.name,
            status=status,
            returncode=outcome.returncode,
            wall_time_s=wall,
            error=error,
            log=str(run.path / "stderr.log"),
            **slurm,
        )
        how = "CANCELLED" if status == "cancelled" else f"FAILED (exit {outcome.returncode})"
        self._say(f"{count} {job.name}: {how}: {_last_line(error)}", job)

    def _say(self, line: str, job: Job) -> None:
        if self.lines is None:
            print(line, flush=True)
            return
        self.lines.end(job.name)
        self.lines.say(line)

    def raise_if_failed(self, trials: list[Trial]) -> None:
        if not self.failed:
            return
        lines = []
        for name in [t.name for t in trials if t.name in self.failed]:
            entry = self.record.index[name]
            how = "cancelled" if entry["status"] == "cancelled" else f"exit {entry['returncode']}"
            lines += [f"  {name} ({how}): {_last_line(entry['error'])}", f"    log: {entry['log']}"]
        cancelled = sum(self.record.index[name]["status"] == "cancelled" for name in self.failed)
        how = (
            "failed"
            if not cancelled
            else "were cancelled"
            if cancelled == len(self.failed)
            else f"failed or were cancelled ({cancelled} cancelled)"
        )
        raise SweepFailed(
            f"{len(self.failed)} of {len(trials)} trials {how} (their errors are in {self.record.path}):\n" + "\n".join(lines)
        )


def _durations(outcome: Outcome, results: dict[str, Any]) -> str:
    """The trial's process's time, and of it its training's (what the trial's own log says it
    finished in; a resumed trial's, this session's): `960 s (743 s of it training)`."""
    sessions = results.get("sessions") or [{}]
    training = sessions[-1].get("wall_time_s", results.get("wall_time_s"))
    of_it = f" ({training:.0f} s of it training)" if isinstance(training, (int, float)) else ""
    return f"{outcome.wall_time_s:.0f} s{of_it}"


def _last_line(text: str | None) -> str:
    return ((text or "").strip().splitlines()[-1:] or [""])[0]


def _unfinished_reason(run: RunDir) -> str:
    status = run.status()
    if status is None:
        return "it wrote no status.json"
    step = f" at step {status['step']}" if "step" in status else ""
    return f"status.json says {status.get('status')}{step}; re-run the sweep to resume it"


def run_sweep(path: str | Path, overrides: typing.Sequence[str], runs: str | Path, *, dry_run: bool, registry: Registry) -> int:
    plan = plan_sweep(path, overrides, runs, registry=registry)
    check_sources(plan)
    if plan.sweep.search is not None:
        check_search(plan.sweep, plan.path, _variant_trials(plan), registry)
    if dry_run:
        print(render_plan(plan))
        return 0
    check(plan.sweep.launcher)
    made = [d for d in (plan.directory, *plan.directory.parents) if not d.exists()]  # by hold_run, if it goes on
    # one sweep at a time in a sweep directory: another would start the trials this one queued
    hold_run(plan.directory, doing="run the sweep again")
    try:
        if plan.sweep.search is not None:
            plan = plan_sweep(path, overrides, runs, tuned=_search(plan), registry=registry)
        return _run(plan)
    finally:
        release_run(plan.directory)
        for folder in made:  # a sweep that started nothing leaves no folder it made
            if not folder.is_dir() or any(folder.iterdir()):
                break
            folder.rmdir()


def check_sources(plan: Plan) -> None:
    """Each model the trials to run start from (init_from) read once, as `aiayn validate` reads
    it, before any trial starts: a source that is missing or unreadable is one message, not the
    same failure from every trial. A resumed trial's weights are its own checkpoint's."""
    starting = [(t, t.spec.init_from.path) for t, st in zip(plan.trials, plan.states) if st.action == "run" and t.spec.init_from]
    checked: set[str] = set()
    for trial, path in starting:
        if path in checked:
            continue
        checked.add(path)
        try:
            load_source_model(path, plan.registry)
        except UserError as e:
            sharing = sum(other == path for _, other in starting)
            who = f"{sharing} trials start" if sharing > 1 else f"trial {trial.name} starts"
            raise UserError(f"{who} from {path}, and nothing was started: {e}") from None


def _variant_trials(plan: Plan) -> list[Trial]:
    """The first trial of each variant (its first seed's): what a search tunes for the variant."""
    return list({t.variant: t for t in reversed(plan.trials)}.values())[::-1]


def _search(plan: Plan) -> dict[str, list[str]]:
    """Tune each variant (its first seed's trial stands for it); {variant: its best settings}."""
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise UserError("search: a sweep's search runs on Optuna, which is not installed: pip install 'optuna>=4.2'") from None
    from aiayn.builder.sweep.search import JOURNAL, tune
    from aiayn.builder.sweep.search_notes import startup_note

    search = plan.sweep.search
    assert search is not None
    variants = _variant_trials(plan)
    print(
        f"search: {search.n_trials} trials per variant ({len(variants)}: {', '.join(t.variant for t in variants)}), "
        f"{search.sampler} sampler, {search.pruner.type} pruner, on valid {search.metric.upper()} -> {plan.directory / JOURNAL}",
        flush=True,
    )
    if note := startup_note(search):
        print(f"note: {note}", flush=True)
    best = tune(plan.sweep, plan.directory, variants, report=lambda line: print(f"  {line}", flush=True))
    missing = [t.variant for t in variants if t.variant not in best]
    if missing:
        raise SweepFailed(
            f"the search found no complete trial for {', '.join(missing)} (all pruned or failed); see {plan.directory / 'search'}"
        )
    for name, settings in best.items():
        print(f"best {name}: {' '.join(settings)}", flush=True)
    return best


def _run(plan: Plan) -> int:
    before = _left_as_it_was(plan)
    record, jobs = prepare(plan)
    skipped = len(plan.trials) - len(jobs)
    print(
        f"sweep {plan.sweep.name}: {len(plan.trials)} trials, {skipped} finished before (skipped), {len(jobs)} to run -> {plan.directory}",
        flush=True,
    )
    lines = TrialLines(jobs)
    reporter = Reporter(record, len(jobs), lines)
    with lines.shown():
        _launch(plan, jobs, record, reporter, undo=before)
    record.finish()
    _print_results(plan.directory, plan.registry)
    if plan.sweep.keep != "all":  # after the table, which may translate the test split with them
        for trial, st in zip(plan.trials, plan.states):
            if RunDir(st.run_dir).results() is not None:
                RunDir(st.run_dir).drop_checkpoints(plan.sweep.keep)
    reporter.raise_if_failed(plan.trials)
    return 0


def _launch(plan: Plan, jobs: list[Job], record: SweepRecord, reporter: Reporter, *, undo: Callable[[], None]) -> None:
    """The jobs on the sweep's launcher, each outcome to the reporter as it arrives; `undo` where
    the launcher could start none."""
    launcher = plan.sweep.launcher
    if jobs and isinstance(launcher, LocalLauncherSpec):
        launch_local(jobs, launcher, reporter)
    elif jobs and isinstance(launcher, SlurmLauncherSpec):
        try:
            launch_slurm(
                jobs,
                launcher,
                plan.directory / "submitit",
                reporter,
                name=plan.sweep.name,
                on_submit=lambda job, job_id: record.update(job.name, status="submitted", job_id=job_id),
            )
        except LauncherFailed:
            undo()  # no job runs: the sweep's folder as it was
            raise


def _left_as_it_was(plan: Plan) -> Callable[[], None]:
    """What undoes `prepare` where no job could start: the folders it made go, sweep.json and the
    trials' trial.json are as they were."""
    files = [plan.directory / "sweep.json", *(st.run_dir.parent / TRIAL_FILE for st in plan.states if st.action != "skip")]
    kept = {path: path.read_bytes() for path in files if path.is_file()}
    made = [p for st in plan.states if st.action != "skip" for p in (st.run_dir.parent, st.run_dir) if not p.exists()]
    made += [] if (plan.directory / "submitit").exists() else [plan.directory / "submitit"]

    def undo() -> None:
        for path in files:
            if path in kept:
                path.write_bytes(kept[path])
            else:
                path.unlink(missing_ok=True)
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)

    return undo


def _print_results(directory: Path, registry: Registry) -> None:
    from aiayn.builder.sweep.results import write_results

    try:
        print()
        print(write_results(directory, registry=registry))
        print(f"wrote {directory / 'results.md'}, results.csv and results.png; tensorboard --logdir {directory}")
    except UserError as e:
        print(f"no results table: {e}")

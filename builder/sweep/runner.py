"""`aiayn sweep`: plan the trials, skip the finished ones, launch the rest, record every outcome
in sweep.json, then write the results table of the sweep's directory."""

import datetime
import json
import threading
import typing
from pathlib import Path
from typing import Any

from builder import rundir
from builder.errors import UserError
from builder.sweep.launch import Job, Outcome, check, launch_local, launch_slurm, launcher_overrides, trial_argv
from builder.sweep.plan import Trial, TrialState, expand, load_sweep, split_overrides, state, write_trial_record
from schemas.sweep import LocalLauncherSpec, SweepSpec


class SweepRecord:
    """sweep.json: the sweep's trials and what became of each, rewritten as they finish."""

    def __init__(self, path: Path, sweep: SweepSpec, sweep_file: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.data: dict[str, Any] = {
            "name": sweep.name,
            "sweep_file": str(sweep_file),
            "launcher": sweep.launcher.model_dump(mode="json"),
            "started_at": _now(),
            "finished_at": None,
            "trials": [],
        }
        self.index: dict[str, dict[str, Any]] = {}

    def add(self, trial: Trial, run_dir: Path, status: str) -> None:
        entry = {
            "name": trial.name,
            "variant": trial.variant,
            "seed": trial.seed,
            "experiment": str(trial.experiment),
            "overrides": list(trial.overrides),
            "config_hash": trial.config_hash,
            "run_dir": str(run_dir),
            "status": status,
        }
        self.data["trials"].append(entry)
        self.index[trial.name] = entry

    def update(self, name: str, **fields: Any) -> None:
        with self.lock:
            self.index[name].update(fields)
            self.write()

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        rundir.write_json(self.path, self.data)


def _now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def _results(run_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((run_dir / "results.json").read_text())
    except (OSError, ValueError):
        return None


def _unfinished_reason(run_dir: Path) -> str:
    try:
        status = json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        return "it wrote no status.json"
    step = f" at step {status['step']}" if "step" in status else ""
    return f"status.json says {status.get('status')}{step}; re-run the sweep to resume it"


def run_sweep(path: str | Path, overrides: typing.Sequence[str], runs: str | Path, *, dry_run: bool) -> int:
    path = Path(path)
    sweep_overrides, trial_overrides = split_overrides(overrides)
    sweep = load_sweep(path, sweep_overrides)
    trials = expand(sweep, path, trial_overrides)
    sweep_dir = Path(runs) / sweep.name
    states = [state(t, sweep_dir) for t in trials]
    if dry_run:
        print(render_plan(sweep, path, sweep_dir, trials, states))
        return 0

    check(sweep.launcher)
    record = SweepRecord(sweep_dir / "sweep.json", sweep, path)
    extra = launcher_overrides(sweep.launcher)
    jobs: list[Job] = []
    for trial, st in zip(trials, states):
        record.add(trial, st.run_dir, "skipped" if st.action == "skip" else "queued")
        if st.action == "skip":
            results = _results(st.run_dir) or {}
            record.index[trial.name].update(bleu=results.get("bleu"), ppl=results.get("ppl"))
            continue
        st.run_dir.mkdir(parents=True, exist_ok=True)
        write_trial_record(trial, st.run_dir)
        jobs.append(Job(trial.name, trial_argv(trial.experiment, [*trial.overrides, *extra], st.run_dir), st.run_dir, str(Path.cwd())))
    record.write()
    skipped = len(trials) - len(jobs)
    print(f"sweep {sweep.name}: {len(trials)} trials, {skipped} finished before (skipped), {len(jobs)} to run -> {sweep_dir}", flush=True)

    done = 0
    failed: list[str] = []

    def on_done(job: Job, outcome: Outcome) -> None:
        nonlocal done
        results = _results(job.run_dir)
        with record.lock:
            done += 1
            count = f"[{done}/{len(jobs)}]"
        if results is not None:
            record.update(job.name, status="finished", returncode=outcome.returncode, wall_time_s=round(outcome.wall_time_s, 1), bleu=results["bleu"], ppl=results["ppl"])
            print(f"{count} {job.name}: finished in {outcome.wall_time_s:.0f} s: BLEU {results['bleu']:.2f}, PPL {results['ppl']:.2f}", flush=True)
            return
        error = outcome.error if outcome.returncode != 0 else f"exited 0 without results.json: {_unfinished_reason(job.run_dir)}"
        failed.append(job.name)
        record.update(
            job.name, status="failed", returncode=outcome.returncode, wall_time_s=round(outcome.wall_time_s, 1), error=error, log=str(job.run_dir / "stderr.log")
        )
        last = (error or "").strip().splitlines()[-1:] or [""]
        print(f"{count} {job.name}: FAILED (exit {outcome.returncode}): {last[0]}", flush=True)

    if jobs:
        launcher = sweep.launcher
        if isinstance(launcher, LocalLauncherSpec):
            launch_local(jobs, launcher, on_done)
        else:
            launch_slurm(
                jobs, launcher, sweep_dir / "submitit", on_done, name=sweep.name,
                on_submit=lambda job, job_id: record.update(job.name, status="submitted", job_id=job_id),
            )  # fmt: skip
    record.data["finished_at"] = _now()
    record.write()

    from builder.sweep.results import write_results

    try:
        print()
        print(write_results(sweep_dir))
        print(f"wrote {sweep_dir / 'results.md'}, results.csv and results.png; tensorboard --logdir {sweep_dir}")
    except UserError as e:
        print(f"no results table: {e}")
    if failed:
        lines = []
        for name in [t.name for t in trials if t.name in failed]:
            entry = record.index[name]
            last = (entry["error"] or "").strip().splitlines()[-1:] or [""]
            lines += [f"  {name} (exit {entry['returncode']}): {last[0]}", f"    log: {entry['log']}"]
        raise SweepFailed(f"{len(failed)} of {len(trials)} trials failed (their errors are in {record.path}):\n" + "\n".join(lines))
    return 0


class SweepFailed(UserError):
    """Some trials failed; the others ran. Exit 1, as `aiayn train` failing would."""

    exit_code = 1


def render_plan(sweep: SweepSpec, path: Path, sweep_dir: Path, trials: list[Trial], states: list[TrialState]) -> str:
    from builder.model import count_params

    launcher = sweep.launcher
    how = f"local, {launcher.parallel} at a time" if isinstance(launcher, LocalLauncherSpec) else (
        f"submitit ({launcher.cluster}), {launcher.nodes} node(s) x {launcher.gpus_per_node} GPU(s) per trial"
    )
    rows = [("trial", "params", "action", "changes")]
    for trial, st in zip(trials, states):
        action = {"skip": "skip (finished)", "resume": "resume", "run": "run"}[st.action]
        rows.append((trial.name, f"{count_params(trial.spec.model):,}", f"{action} {st.run_dir}", " ".join(trial.changes)))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"sweep {sweep.name} ({path}): {len(trials)} trials in {sweep_dir}, launcher {how}"]
    lines += [f"{r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}".rstrip() for r in rows]
    counts = {a: sum(s.action == a for s in states) for a in ("run", "resume", "skip")}
    lines.append(f"{counts['run']} to run, {counts['resume']} to resume, {counts['skip']} finished (skipped)")
    return "\n".join(lines)

"""A sweep's `search:`: each variant tuned with Optuna at the same budget, then its best settings
trained with the sweep's seeds (plan.expand's `tuned`), so that the results table compares
tuned variants.

One study per variant, all in one journal file (runs/<sweep>/study.journal: Optuna's
JournalStorage, no database server), so that re-running the sweep continues each study. There
are no batches: each worker (`launcher.parallel` threads; on SLURM, a job array of them) asks the
study for a trial, runs it as an `aiayn train` process, tells the study its result and asks
again; worker k samples with seed search.seed + k. The trial process reports its
validation metric to the same study at every validation and stops, with a checkpoint, when the
pruner says so (builder/train/pruning.py reads AIAYN_SEARCH).
"""

import fcntl
import itertools
import json
import math
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from aiayn.builder.decode.checkpoint import source_model
from aiayn.builder.errors import UserError
from aiayn.builder.registry import Registry
from aiayn.builder.run.config import load_experiment
from aiayn.builder.run.rundir import RunDir
from aiayn.builder.run.study import ENV, make_pruner, storage
from aiayn.builder.sweep.launch import (
    Job,
    Outcome,
    ended_slurm,
    launcher_overrides,
    local_runner,
    run_job,
    slurm_parameters,
    trial_argv,
)
from aiayn.builder.sweep.plan import Trial
from aiayn.schemas.search import CategoricalParam, FloatParam, IntParam, SearchSpec
from aiayn.schemas.sweep import LocalLauncherSpec, SlurmLauncherSpec, SweepSpec

JOURNAL = "study.journal"
SEARCH_DIR = "search"  # runs/<sweep>/search/<variant>/trial<k>/version_0: not rows of the results table


def open_study(journal: Path, name: str, search: SearchSpec, *, worker: int = 0) -> Any:
    """The variant's study; its sampler seeded search.seed + worker, so that workers, each with a
    sampler of its own, do not draw the same settings."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    seed = search.seed + worker
    sampler = {
        "tpe": lambda: optuna.samplers.TPESampler(seed=seed),
        "random": lambda: optuna.samplers.RandomSampler(seed=seed),
        "grid": lambda: optuna.samplers.GridSampler(search.grid(), seed=seed),
    }[search.sampler]()
    return optuna.create_study(
        study_name=name,
        storage=storage(journal),
        sampler=sampler,
        pruner=make_pruner(search.pruner),
        direction=search.direction,
        load_if_exists=True,
    )


def suggest(trial: Any, search: SearchSpec) -> list[str]:
    """The trial's settings, as overrides of the experiment."""
    out = []
    for key, p in search.params.items():
        if isinstance(p, FloatParam):
            value: Any = trial.suggest_float(key, p.low, p.high, log=p.log)
        elif isinstance(p, IntParam):
            value = trial.suggest_int(key, p.low, p.high, step=p.step, log=p.log)
        else:
            value = trial.suggest_categorical(key, list(p.choices))
        out.append(f"{key}={_value(value)}")
    return out


def _value(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else "null" if value is None else str(value)


PROBES = 256  # the most settings check_search tries per variant: every combination of the probes below, or each alone


def probes(param: Any) -> list[Any]:
    """What the up-front check tries of a parameter: every choice, both ends of a range."""
    if isinstance(param, CategoricalParam):
        return list(param.choices)
    return [param.low, param.high]


def probe_settings(search: SearchSpec) -> list[dict[str, Any]]:
    """Every combination of the parameters' probes, or, when there are more than PROBES of them,
    each probe with the other parameters at their first."""
    keys, values = list(search.params), [probes(p) for p in search.params.values()]
    if math.prod(len(v) for v in values) <= PROBES:
        return [dict(zip(keys, combo)) for combo in itertools.product(*values)]
    first = {k: v[0] for k, v in zip(keys, values)}
    return [{**first, k: x} for k, v in zip(keys, values) for x in v]


def check_search(sweep: SweepSpec, sweep_path: Path, variants: list[Trial], registry: Registry) -> None:
    """Every setting the search may draw (each choice, both ends of each range, and their
    combinations) is an experiment each variant accepts, the metric is one it logs, and a pruner
    has a validation to read before the trial's last step."""
    search = sweep.search
    assert search is not None
    settings = probe_settings(search)
    for trial in variants:
        for key in search.params:
            fixed = next((o for o in trial.overrides if o.partition("=")[0] == key), None)
            if fixed is not None:
                raise UserError(
                    f"{sweep_path}: search.params.{key}: the override {fixed} sets it too; the search chooses it: drop the override"
                )
        for setting in settings:
            drawn = [f"{key}={_value(value)}" for key, value in setting.items()]
            try:
                spec = load_experiment(
                    trial.experiment,
                    [*trial.overrides, *drawn],
                    registry=registry,
                    source="by the search",
                    model_of=partial(source_model, registry=registry),
                )
            except UserError as e:
                last = str(e).splitlines()[-1].strip()
                key = next((k for k in setting if last.startswith(k) or f"{k}=" in last), next(iter(setting)))
                alone = "" if len(setting) == 1 else f" (with {', '.join(d for d in drawn if not d.startswith(key + '='))})"
                raise UserError(f"{sweep_path}: search.params.{key}: {last}{alone}") from None
            _check_metric_and_pruner(search, sweep_path, trial.variant, spec, drawn)


def _check_metric_and_pruner(search: SearchSpec, sweep_path: Path, variant: str, spec: Any, drawn: list[str]) -> None:
    if search.metric == "bleu" and not spec.train.validation.bleu:
        raise UserError(
            f"{sweep_path}: search.metric: bleu, but {variant} logs no validation BLEU (train.validation.bleu: false); "
            "set it true, or search on ppl"
        )
    pruner = search.pruner
    if pruner.type == "none":
        return
    trainer = spec.trainer
    if not trainer.validates:
        raise UserError(
            f"{sweep_path}: search.pruner: {pruner.type} reads the metric at each validation, but {variant} "
            "validates only at the end (trainer.val_check_interval: null); set an interval, or pruner: {type: none}"
        )
    interval, steps = trainer.val_check_interval, trainer.max_steps
    first = max(interval or 0, pruner.n_warmup_steps if pruner.type == "median" else 0)
    if interval is not None and -(-first // interval) * interval >= steps:  # the first validation it may prune at
        after = f" after its {pruner.n_warmup_steps} warm-up steps" if pruner.type == "median" and pruner.n_warmup_steps else ""
        raise UserError(
            f"{sweep_path}: search.pruner: {pruner.type} can stop a trial only at a validation before its last step, but "
            f"{variant} ({', '.join(drawn)}) validates every {interval} of its {steps} steps{after}, so no trial is ever "
            f"pruned; lower trainer.val_check_interval below {steps}"
            + (" or search.pruner.n_warmup_steps" if after else "")
            + ", or set pruner: {type: none}"
        )


def tune(
    sweep: SweepSpec, directory: Path, variants: list[Trial], *, report: Callable[[str], None] = print
) -> dict[str, list[str]]:
    """Run each variant's study to search.n_trials finished trials; {variant: its best settings as
    overrides} for the variants whose study has a complete trial. Local: `parallel` worker
    threads; SLURM: one job array of workers (array_parallelism of them, else 2), each asking
    the same journal."""
    import optuna

    search = sweep.search
    assert search is not None
    journal = directory / JOURNAL
    studies = {t.variant: open_study(journal, t.variant, search) for t in variants}
    for study in studies.values():  # a trial left running by a killed sweep (this one holds the directory now)
        for stale in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            study.tell(stale.number, state=optuna.trial.TrialState.FAIL)
    worker = Worker(search, directory, tuple(variants), tuple(launcher_overrides(sweep.launcher)), sweep.trial_seed)
    if isinstance(sweep.launcher, LocalLauncherSpec):
        run, workers = local_runner(sweep.launcher)
        lock = threading.Lock()
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for future in [pool.submit(replace(worker, index=k), run, lock, report) for k in range(workers)]:
                future.result()
    else:
        _on_slurm(worker, sweep, directory, report)
    best = {}
    for name, study in studies.items():
        complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if complete:
            best[name] = [f"{k}={_value(v)}" for k, v in study.best_trial.params.items()]
    return best


@dataclass(frozen=True)
class Worker:
    """One searcher: asks the studies for a trial, runs it, tells its result, until every study
    has its budget. Picklable: on SLURM it is a job of its own (submitit), and the workers of
    several processes share the budget through a lock file beside the journal."""

    search: SearchSpec
    directory: Path
    variants: tuple[Trial, ...]
    extra: tuple[str, ...]  # the launcher's overrides
    seed: int  # train.seed of every trial: none of the sweep's seeds
    index: int = 0  # k of worker k: its sampler's seed is search.seed + k

    def __call__(
        self, run: Callable[..., Outcome] | None = None, lock: Any = None, report: Callable[[str], None] = print
    ) -> None:
        search, journal = self.search, self.directory / JOURNAL
        studies = {t.variant: open_study(journal, t.variant, search, worker=self.index) for t in self.variants}
        by_variant = {t.variant: t for t in self.variants}
        threads = {"OMP_NUM_THREADS": os.environ.get("SLURM_CPUS_PER_TASK", "1")}  # a SLURM worker's trials: its cores
        run = run or (lambda job, env: run_job(job, env, threads))
        lock = lock or _FileLock(self.directory / "study.lock")

        while True:
            with lock:
                name = next((v for v in studies if _budget_left(studies[v], search.n_trials)), None)
                if name is None:
                    return
                trial = studies[name].ask()
            base = by_variant[name]
            params = suggest(trial, search)
            job, env = self._job(base, trial, params, journal)
            trial.set_user_attr("worker", os.environ.get("SLURM_JOB_ID") or f"pid {os.getpid()}")
            outcome = run(job, env)
            # nothing resumes a trial: its checkpoints go before the study hears of it, so that a
            # sweep killed in between leaves no finished trial with its checkpoints
            RunDir(job.run_dir).drop_checkpoints("none")
            report(_tell(studies[name], trial, RunDir(job.run_dir), outcome, search))

    def _job(self, base: Trial, trial: Any, params: list[str], journal: Path) -> tuple[Job, dict[str, str]]:
        """A study's trial as a job: its run directory, its command line and the environment its
        training reads (the study's journal, the trial's number and settings)."""
        name, search = base.variant, self.search
        run_dir = self.directory / SEARCH_DIR / name / f"trial{trial.number:03d}" / "version_0"
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        # the variant's trial as the sweep makes it (seed and name last), with the trial's settings and seed
        overrides = [
            *base.overrides[:-2],
            *params,
            *self.extra,
            f"train.seed={self.seed}",
            f"name={name}-trial{trial.number}",
        ]
        env = {
            ENV: json.dumps(
                {
                    "journal": str(journal),
                    "study": name,
                    "trial": trial.number,
                    "metric": search.metric,
                    "pruner": search.pruner.model_dump(mode="json"),
                    "params": trial.params,
                }
            )
        }
        return Job(f"{name}-trial{trial.number}", trial_argv(base.experiment, overrides, run_dir), run_dir, str(Path.cwd())), env


def _budget_left(study: Any, n_trials: int) -> bool:
    """Whether a study has fewer than n_trials trials that count: done, pruned, running, waiting or failed."""
    done = study.get_trials(deepcopy=False)
    counted = [t for t in done if t.state.name in ("COMPLETE", "PRUNED", "RUNNING", "WAITING") or t.user_attrs.get("error")]
    return len(counted) < n_trials


class _FileLock:
    """flock on a file: the workers of a job array take turns to count a study's trials and ask it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        self.file = open(self.path, "a")
        fcntl.flock(self.file, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.file, fcntl.LOCK_UN)
        self.file.close()


def _on_slurm(worker: Worker, sweep: SweepSpec, directory: Path, report: Callable[[str], None]) -> None:
    """The workers as one job array through submitit; each runs its trials inside its allocation."""
    import submitit

    launcher = sweep.launcher
    assert isinstance(launcher, SlurmLauncherSpec)
    count = launcher.array_parallelism or 2
    executor = submitit.AutoExecutor(folder=directory / "submitit" / "%j", cluster=launcher.cluster)
    executor.update_parameters(**slurm_parameters(launcher, name=f"{sweep.name}-search"))
    with executor.batch():
        handles = [executor.submit(replace(worker, index=k)) for k in range(count)]
    report(f"{count} search workers: SLURM jobs {' '.join(h.job_id for h in handles)}")
    ended = ended_slurm(handles) if launcher.cluster == "slurm" else ((h, None) for h in submitit.helpers.as_completed(handles))
    for handle, state in ended:  # a worker that died leaves its trial running: the next sweep replaces it
        if not handle.paths.result_pickle.exists():
            report(f"search worker {handle.job_id} ended {state} (its log: {handle.paths.stderr})")
            continue
        try:
            handle.result()
        except Exception as e:  # the worker raised: submitit's message, its last line
            report(f"search worker {handle.job_id} failed: {str(e).strip().splitlines()[-1]}")


def _tell(study: Any, trial: Any, run: RunDir, outcome: Outcome, search: SearchSpec) -> str:
    import optuna

    results, status = run.results(), (run.status() or {})
    label = f"{study.study_name} trial {trial.number} ({', '.join(f'{k}={v}' for k, v in trial.params.items())})"
    if results is not None:
        study.tell(trial, float(results[search.metric]))
        return f"{label}: {search.metric} {results[search.metric]:.2f}"
    if status.get("status") == "pruned":
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        return f"{label}: pruned at step {status.get('step')}"
    trial.set_user_attr("error", (outcome.error or "")[-500:] or f"exit code {outcome.returncode}")
    study.tell(trial, state=optuna.trial.TrialState.FAIL)
    return f"{label}: FAILED (exit {outcome.returncode}); log: {run.path / 'stderr.log'}"

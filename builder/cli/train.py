"""aiayn train EXP.yaml [k=v ...] [--resume]: train, write the run directory, then results.json."""

import argparse
import time
from pathlib import Path

from builder.cli.inspect import add_experiment_arguments
from builder.errors import UserError
from builder.run.config import load_experiment
from builder.run.rundir import RunDir
from schemas.experiment import ExperimentSpec


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_experiment_arguments(p)
    p.add_argument("--resume", action="store_true", help="continue the latest run of this experiment from its last checkpoint")
    p.add_argument("--runs", default="runs", help="root of the run directories (default: runs)")
    p.add_argument("--run-dir", type=Path, help="use this run directory (runs/<name>/version_<n>), e.g. for multi-node jobs")


def choose_run(spec: ExperimentSpec, args: argparse.Namespace) -> tuple[RunDir, bool]:
    """(the run directory, whether to resume it). --run-dir (or the one rank 0 chose) resumes
    when it has a checkpoint; --resume takes the latest run of the experiment that has one."""
    given = RunDir.inherited() or (RunDir(args.run_dir) if args.run_dir else None)
    if given is not None and given.path.exists() and not given.path.is_dir():
        raise UserError(f"--run-dir {given.path} is a file; give a run directory (runs/<name>/version_<n>)")
    if given is not None:
        return given, given.has_checkpoint
    parent = Path(args.runs) / spec.name
    for folder in (Path(args.runs), parent):
        if folder.exists() and not folder.is_dir():
            raise UserError(f"--runs {args.runs}: {folder} is a file; give a folder for the run directories")
    if not args.resume:
        return RunDir.next_in(parent), False
    latest = RunDir.latest_in(parent)
    if latest is None:
        raise UserError(f"--resume: no run of {spec.name!r} under {parent} has a checkpoint; train it first, without --resume")
    return latest, True


def train(args: argparse.Namespace) -> int:
    spec = load_experiment(args.experiment, args.overrides)
    from builder.train.fit import fit  # Lightning is imported only once the config is valid
    from builder.train.progress import quiet_lightning

    run, resume = choose_run(spec, args)
    start = time.time()
    with quiet_lightning():
        results = fit(spec, run, experiment_path=Path(args.experiment), resume=resume)
    if results is not None:
        print(
            f"finished in {time.time() - start:.0f} s: BLEU {results['bleu']:.2f}, PPL {results['ppl']:.2f} "
            f"on {results['split']} ({results['n_sentences']} sentences); {run.path}"
        )
    return 0

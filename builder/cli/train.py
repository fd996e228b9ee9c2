"""aiayn train EXP.yaml [k=v ...] [--resume]: train, write the run directory, then results.json."""

import argparse
import os
import time
from functools import partial
from pathlib import Path

from aiayn.builder.cli.inspect import add_experiment_arguments
from aiayn.builder.decode.checkpoint import source_model
from aiayn.builder.errors import UserError, resolved
from aiayn.builder.run.config import load_experiment
from aiayn.builder.run.outputs import is_run
from aiayn.builder.run.rundir import RUN_FILE, RunDir, final_scores
from aiayn.schemas.experiment import ExperimentSpec


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_experiment_arguments(p)
    p.add_argument("--resume", action="store_true", help="continue the latest run of this experiment from its last checkpoint")
    p.add_argument("--runs", default="runs", help="root of the run directories (default: runs)")
    p.add_argument("--run-dir", type=Path, help="use this run directory (runs/<name>/version_<n>), e.g. for multi-node jobs")


def choose_run(spec: ExperimentSpec, args: argparse.Namespace) -> tuple[RunDir, bool]:
    """(the run directory, whether to resume it). --run-dir (or the one rank 0 chose) resumes
    when it has a checkpoint; --resume takes the latest run of the experiment that has one."""
    inherited = RunDir.inherited()
    if inherited is not None:
        return inherited, inherited.has_checkpoint
    given = RunDir(args.run_dir) if args.run_dir else None
    if given is not None:
        check_run_dir(given, resume=args.resume)
        return given, given.has_checkpoint
    resolved(args.runs)  # a --runs that loops is named as itself
    parent = Path(args.runs) / spec.name
    for folder in (Path(args.runs), parent):
        if folder.exists() and not folder.is_dir():
            raise UserError(f"--runs {args.runs}: {folder} is a file; give a folder for the run directories")
    if not args.resume:
        run = RunDir.next_in(parent)
        _refuse_separate_choices(spec, run)
        return run, False
    latest = RunDir.latest_in(parent)
    if latest is None:
        raise UserError(f"--resume: no run of {spec.name!r} under {parent} has a checkpoint; train it first, without --resume")
    return latest, True


def check_run_dir(run: RunDir, *, resume: bool) -> None:
    """--run-dir names a run (resumed where it has a checkpoint; the files of one in the making,
    which another node of the job may have begun, count), or a new or empty folder for one;
    --resume needs the checkpoint. A folder of other files is never trained into."""
    path = run.path
    if path.exists() and not path.is_dir():
        raise UserError(f"--run-dir {path} is a file; give a run directory (runs/<name>/version_<n>)")
    a_run = path.is_dir() and (is_run(path) or run.config.is_file())
    others = [] if a_run or not path.is_dir() else sorted(p.name for p in path.iterdir() if not RUN_FILE.fullmatch(p.name))
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        raise UserError(
            f"--run-dir {path} holds files that are not a run's ({shown}); a run is trained into a new or empty folder, "
            "or into its own run directory (runs/<name>/version_<n>): give another"
        )
    if resume and not run.has_checkpoint:
        what = (
            "does not exist"
            if not path.exists()
            else "is an empty folder"
            if not any(path.iterdir())
            else "is a run with no checkpoint yet"
        )
        raise UserError(
            f"--resume --run-dir {path}: it {what}, so there is nothing to resume; drop --resume to train a new run there"
        )


def launched_apart(spec: ExperimentSpec) -> str | None:
    """Why this job's processes are started apart (other nodes; torchrun's or srun's other
    processes), or None. Such processes cannot be handed rank 0's run directory, so each would
    number a new version_<n> on its own; they must be given one."""
    if spec.trainer.num_nodes > 1:
        return f"trainer.num_nodes={spec.trainer.num_nodes}"
    # Lightning's own launcher sets WORLD_SIZE too, in the process that goes on: only torchrun's counts
    launchers = {"WORLD_SIZE": "TORCHELASTIC_RUN_ID", "SLURM_NTASKS": "SLURM_JOB_ID"}
    for variable, launcher in launchers.items():
        value = os.environ.get(variable, "")
        if launcher in os.environ and value.isdigit() and int(value) > 1:
            return f"{variable}={value}"
    return None


def _refuse_separate_choices(spec: ExperimentSpec, run: RunDir) -> None:
    reason = launched_apart(spec)
    if reason is not None:
        raise UserError(
            f"{reason}: the processes of this job start apart and would each number their own new run "
            f"directory; give them all the same one with --run-dir {run.path} (or --resume to continue the latest run)"
        )


def final_of(results: dict) -> str:
    """What the final scores were measured on: the split, its sentences (in blocks), the averaged model."""
    read = f"{results['n_sentences']} sentences"
    if results.get("n_blocks") is not None:
        read += f" in {results['n_blocks']} blocks of {results['block_size']} tokens"
    averaged = results.get("averaged_checkpoints") or []
    model = f", the mean of the last {len(averaged)} checkpoints" if len(averaged) > 1 else ""
    return f"on {results['split']} ({read}){model}"


def train(args: argparse.Namespace) -> int:
    spec = load_experiment(
        args.experiment, args.overrides, registry=args.registry, model_of=partial(source_model, registry=args.registry)
    )
    from aiayn.builder.train.fit import fit  # Lightning is imported only once the config is valid
    from aiayn.builder.train.progress import quiet_lightning

    run, resume = choose_run(spec, args)
    start = time.time()
    with quiet_lightning():
        results = fit(spec, run, experiment_path=Path(args.experiment), resume=resume)
    if results is not None:
        print(f"finished in {time.time() - start:.0f} s: {final_scores(results)} {final_of(results)}; {run.path}")
    return 0

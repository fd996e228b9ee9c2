"""aiayn train EXP.yaml [k=v ...] [--resume]: train, write the run directory, then results.json."""

import argparse
import time
from pathlib import Path

from builder.config import load_experiment
from builder import rundir
from builder.commands.inspect import add_experiment_arguments


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_experiment_arguments(p)
    p.add_argument("--resume", action="store_true", help="continue the latest run of this experiment from its last checkpoint")
    p.add_argument("--runs", default="runs", help="root of the run directories (default: runs)")
    p.add_argument("--run-dir", type=Path, help="use this run directory (runs/<name>/version_<n>), e.g. for multi-node jobs")


def train(args: argparse.Namespace) -> int:
    spec = load_experiment(args.experiment, args.overrides)
    from builder.training import run  # Lightning is imported only once the config is valid

    run_dir = rundir.inherited_run_dir() or args.run_dir
    resume = args.resume
    if run_dir is None:
        root = Path(args.runs)
        run_dir = rundir.latest_run_dir(root, spec.name) if resume else rundir.new_run_dir(root, spec.name)
    elif not run_dir.exists():
        run_dir.mkdir(parents=True)
        resume = False
    elif (run_dir / "checkpoints" / "last.ckpt").exists():
        resume = True
    start = time.time()
    results = run(spec, run_dir, experiment_path=Path(args.experiment), resume=resume)
    if results is not None:
        print(f"finished in {time.time() - start:.0f} s: BLEU {results['bleu']:.2f}, PPL {results['ppl']:.2f}; {run_dir}")
    return 0

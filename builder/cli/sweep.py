"""aiayn sweep SWEEP.yaml [k=v ...] [--dry-run] [--runs ROOT]: every trial of a sweep, each a run
under ROOT/<sweep name>/, finished ones skipped; then the results table."""

import argparse
from pathlib import Path

from aiayn.builder.errors import UserError
from aiayn.builder.sweep.runner import run_sweep


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("sweep_file", metavar="SWEEP.yaml", help="sweep file, e.g. experiments/table3.sweep.yaml")
    p.add_argument(
        "overrides",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="overrides of every trial (trainer.max_steps=100); sweep.KEY=VALUE changes the sweep file (sweep.launcher.parallel=2)",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="list the trials, their parameter counts and which would be skipped; run nothing"
    )
    p.add_argument(
        "--runs",
        default="runs",
        metavar="ROOT",
        help="root of the run directories; the sweep's are under ROOT/<sweep name> (default: runs)",
    )


def sweep(args: argparse.Namespace) -> int:
    runs = Path(args.runs)
    blocking = next((p for p in (runs, *runs.parents) if p.exists()), None)
    if blocking is not None and not blocking.is_dir():
        raise UserError(f"--runs {runs}: {blocking} is a file; give a folder for the sweep's runs")
    return run_sweep(args.sweep_file, args.overrides, args.runs, dry_run=args.dry_run, registry=args.registry)

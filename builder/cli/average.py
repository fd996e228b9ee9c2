"""aiayn average CKPT... -o OUT, or --last K RUN_DIR -o OUT: average the model parameters (Sec 6.1).

The paper averaged the last 5 (base) or 20 (big) checkpoints, written every 10 minutes. The output
is a slim checkpoint (experiment, model weights, the run's tokenizer) that `aiayn translate` and
`aiayn evaluate` take; with one input it is a slim copy of that checkpoint (no optimizer state).
"""

import argparse
from pathlib import Path

from aiayn.builder.decode.checkpoint import average_checkpoints, resolve_run_or_checkpoint, save_checkpoint
from aiayn.builder.errors import UserError
from aiayn.builder.run.atomic import check_writable
from aiayn.builder.run.outputs import check_output


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoints", nargs="*", default=[], type=Path, metavar="CKPT", help="checkpoints of one run")
    p.add_argument(
        "--last",
        type=int,
        metavar="K",
        help="average the K newest step*.ckpt of the one run directory given instead of CKPT...",
    )
    p.add_argument("--output", "-o", type=Path, required=True, help="where to write the averaged checkpoint")


def average(args: argparse.Namespace) -> int:
    paths = list(args.checkpoints)
    if args.last is not None:
        if args.last < 1:
            raise UserError(f"--last ({args.last}) must be at least 1")
        if len(paths) != 1:
            raise UserError(f"--last {args.last} takes one run directory, got {len(paths)} paths")
        _, run = resolve_run_or_checkpoint(paths[0])
        if run is None or not paths[0].is_dir():
            raise UserError(f"--last {args.last}: {paths[0]} is not a run directory (runs/<name>/version_<n>)")
        found = run.step_checkpoints()
        if len(found) < args.last:
            names = ", ".join(p.name for p in found) or "none"
            raise UserError(
                f"--last {args.last}: {run.checkpoints} has only {len(found)} step checkpoints ({names}); "
                f"ask for at most {len(found)}, or keep more (train.checkpoint.keep_last)"
            )
        paths = found[-args.last :]
    if not paths:
        raise UserError("give the checkpoints to average (CKPT...), or --last K RUN_DIR")
    check_writable(args.output, "--output")
    check_output(args.output, "--output", inputs=[*paths, *args.checkpoints])
    save_checkpoint(average_checkpoints(paths, args.registry), args.output)
    print(f"averaged {len(paths)} checkpoint{'s' if len(paths) != 1 else ''} -> {args.output}")
    for path in paths:
        print(f"  {path}")
    return 0

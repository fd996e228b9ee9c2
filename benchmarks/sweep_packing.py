"""Several small trials sharing one GPU (`launcher.trials_per_gpu`) against one at a time.

    python benchmarks/sweep_packing.py [--trials 4] [--steps 300] [--runs /tmp/sweep-packing]

Runs one sweep twice through `aiayn sweep`: `--trials` seeds of the demo experiment, first one
trial at a time on the GPU (trials_per_gpu=1), then all of them at once (trials_per_gpu=K), and
prints both wall times and their ratio. A demo-sized trial uses a few percent of a GPU, so K at once
should take little longer than one. Without a GPU it compares `parallel: 1` with `parallel: 2`
on the CPU instead (what the CPU launcher offers), and says so.
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent

SWEEP = """\
name: packing-{label}
base: {base}
seeds: {seeds}
overrides: [reported=null, trainer.max_steps={steps}, trainer.val_check_interval=null, train.checkpoint.every_n_train_steps={steps}]
launcher: {launcher}
"""


def run(label: str, launcher: str, args: argparse.Namespace, folder: Path) -> float:
    sweep = folder / f"{label}.sweep.yaml"
    seeds = list(range(1, args.trials + 1))
    sweep.write_text(
        SWEEP.format(label=label, base=ROOT / "experiments" / "demo.yaml", seeds=seeds, steps=args.steps, launcher=launcher)
    )
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "aiayn", "sweep", str(sweep), "--runs", str(args.runs)], capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{label}: aiayn sweep exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--runs", type=Path, default=Path(tempfile.gettempdir()) / "sweep-packing")
    args = parser.parse_args()
    k = args.trials
    if torch.cuda.is_available():
        device = torch.cuda.get_device_name()
        one = "{type: local, parallel: 1, gpus_per_trial: 1, trials_per_gpu: 1}"
        packed = f"{{type: local, parallel: {k}, gpus_per_trial: 1, trials_per_gpu: {k}}}"
        labels = ("one at a time", f"{k} per GPU")
    else:
        device = f"CPU ({torch.get_num_threads()} threads): no GPU, parallel 1 against 2"
        one = "{type: local, parallel: 1, gpus_per_trial: 0}"
        packed = "{type: local, parallel: 2, gpus_per_trial: 0}"
        labels = ("parallel 1", "parallel 2")
    with tempfile.TemporaryDirectory() as folder:
        sequential = run("sequential", one, args, Path(folder))
        together = run("packed", packed, args, Path(folder))
    print(f"{k} demo trials of {args.steps} steps on {device}")
    print(f"{labels[0]:>16}: {sequential:7.1f} s wall")
    print(f"{labels[1]:>16}: {together:7.1f} s wall  ({sequential / together:.2f}x faster)")


if __name__ == "__main__":
    main()

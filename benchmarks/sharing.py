"""Sharing a machine: one demo training alone, then two and three side by side, under each way of
waiting and choosing threads; prints each one's wall time and its ratio to one alone.

    python benchmarks/sharing.py [--steps 60] [--only NAME ...]

Each run is `aiayn train experiments/demo.yaml trainer.max_steps=STEPS` as a user types it, start-up
and final evaluation included, on a token cache warmed beforehand. The ways (columns of issue 34):
  before      OpenMP's threads spin 300,000 turns before they sleep (libgomp's default, which
              GOMP_SPINCOUNT=300000 restores) and a run takes every core (train.cpu_threads=CORES)
  passive     OMP_WAIT_POLICY=PASSIVE, every core
  free cores  libgomp's spin, train.cpu_threads=auto (the cores others leave free, looked at again
              every 5 s)
  both        aiayn's default now: OMP_WAIT_POLICY=PASSIVE (the CLI sets it) and auto threads
A fair share of C cores costs k/C for k runs at once (two runs on 2 cores: 1x-2x; three: 1.5x-3x).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aiayn.builder.run.cpu import WAIT_VARIABLES, usable_cores

ROOT = Path(__file__).resolve().parent.parent

CORES = usable_cores()
WAYS = {
    "before": ({"GOMP_SPINCOUNT": "300000"}, [f"train.cpu_threads={CORES}"]),
    "passive": ({"OMP_WAIT_POLICY": "PASSIVE"}, [f"train.cpu_threads={CORES}"]),
    "free cores": ({"GOMP_SPINCOUNT": "300000"}, ["train.cpu_threads=auto"]),
    "both": ({}, ["train.cpu_threads=auto"]),
}


def runs_at_once(k: int, env: dict[str, str], overrides: list[str], work: Path, steps: int) -> list[float]:
    """Wall seconds of each of `k` demo trainings started together."""
    base = [sys.executable, "-m", "aiayn", "train", str(ROOT / "experiments" / "demo.yaml"), f"trainer.max_steps={steps}",
            "trainer.enable_progress_bar=false", f"data.cache_dir={work / 'cache'}", *overrides]  # fmt: skip
    started = []
    for i in range(k):
        runs = work / f"runs{k}-{i}-{time.monotonic_ns()}"
        started.append((time.perf_counter(), subprocess.Popen([*base, "--runs", str(runs)], cwd=work, env=env,
                                                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)))  # fmt: skip
    walls = []
    for start, process in started:
        _, err = process.communicate()
        if process.returncode != 0:
            raise SystemExit(f"a run failed ({process.returncode}): {err.decode()[-2000:]}")
        walls.append(time.perf_counter() - start)
    return walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60, help="optimizer steps of each demo run (default: 60)")
    parser.add_argument("--only", nargs="+", choices=sorted(WAYS), help="measure these ways only")
    args = parser.parse_args()
    user = {k: v for k, v in os.environ.items() if k not in (*WAIT_VARIABLES, "OMP_NUM_THREADS")}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        runs_at_once(1, user, [], work, 1)  # the demo corpus's tokens cached once, for every run
        print(f"{CORES} usable cores; demo, {args.steps} steps a run, start-up included (seconds; x: over one alone)")
        print(f"{'way':<12}{'alone':>8}{'two at once':>22}{'three at once':>22}")
        for name in args.only or WAYS:
            env, overrides = WAYS[name]
            alone = runs_at_once(1, {**user, **env}, overrides, work, args.steps)[0]
            cells = [f"{alone:8.1f}"]
            for k in (2, 3):
                walls = runs_at_once(k, {**user, **env}, overrides, work, args.steps)
                mean = statistics.fmean(walls)
                cells.append(f"{mean:8.1f} ({mean / alone:4.2f}x, max {max(walls) / alone:4.2f}x)")
            print(f"{name:<12}" + "".join(f"{c:>22}" if i else c for i, c in enumerate(cells)), flush=True)


if __name__ == "__main__":
    main()

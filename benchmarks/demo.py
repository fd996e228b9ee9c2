"""Train the embedded demo as a newcomer would (`aiayn train experiments/demo.yaml`) and print
the wall time, the training throughput and the BLEU of the held-out splits.

    python benchmarks/demo.py [--threads N]

Prints one table; the numbers come from the run's results.json and `aiayn evaluate --json`.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, help="OMP_NUM_THREADS for the run (default: torch's)")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    with tempfile.TemporaryDirectory() as work:
        cmd = [
            sys.executable,
            "-m",
            "aiayn",
            "train",
            str(ROOT / "experiments" / "demo.yaml"),
            "trainer.enable_progress_bar=false",
            f"data.cache_dir={work}/cache",
        ]
        start = time.perf_counter()
        subprocess.run(cmd, cwd=work, env=env, check=True, capture_output=True)
        wall = time.perf_counter() - start
        run = Path(work) / "runs" / "demo" / "version_0"
        results = json.loads((run / "results.json").read_text())
        test = subprocess.run(
            [sys.executable, "-m", "aiayn", "evaluate", str(run), "--json"],
            cwd=work,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        report = json.loads(test.stdout)
    print(f"{'measure':<34}{'value':>12}")
    rows = [
        ("aiayn train wall time (s)", f"{wall:.0f}"),
        ("  of which training loop (s)", f"{results['wall_time_s']:.0f}"),
        ("training tokens/s (src + tgt)", f"{results['tokens_per_s']:.0f}"),
        ("optimizer steps", f"{results['steps']}"),
        ("valid BLEU (300 sentences)", f"{results['bleu']:.2f}"),
        ("valid PPL", f"{results['ppl']:.3f}"),
        ("test BLEU (300 held-out sentences)", f"{report['bleu']:.2f}"),
        ("test chrF", f"{report['chrf']:.2f}"),
    ]
    for name, value in rows:
        print(f"{name:<34}{value:>12}")
    print(f"sacreBLEU {report['signature']}")


if __name__ == "__main__":
    main()

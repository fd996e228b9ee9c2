"""Forced scoring against translation: what `aiayn score` and `aiayn translate` spend on the same
sources, with a trained run (the demo: `aiayn train experiments/demo.yaml` first).

    python benchmarks/score.py RUN [--pairs 1000 --repeats 3 --threads 1]

Pairs are the demo generator's (English sources, their German references). Each measured call is
the one the CLI verb makes after loading the run (Translator.score for `aiayn score`,
Translator.translate for `aiayn translate`, with --n-best / --scores / --alignments as given), so
start-up is left out; medians of --repeats interleaved runs after a warm-up. Prints sentences per
second and each call's time as a ratio to plain translation in the same process.
"""

import argparse

import torch
from common import interleaved_medians

import aiayn
from aiayn.builder.data.demo import generate_demo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="a trained run directory (the demo's, for its vocabulary)")
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    translator = aiayn.load_run(args.run, device="cpu")
    sources, references = generate_demo(1, 1, args.pairs, seed=12345)["test"]
    calls = {
        "aiayn translate": lambda: translator.translate(sources),
        "aiayn translate --scores": lambda: translator.translate(sources, with_scores=True),
        "aiayn translate --n-best 4 --scores": lambda: translator.translate(sources, n_best=4, with_scores=True),
        "aiayn translate --alignments": lambda: translator.translate(sources, alignments=True),
        "aiayn score (references)": lambda: translator.score(sources, references),
        "aiayn score --alignments": lambda: translator.score(sources, references, alignments=True),
    }
    times = interleaved_medians(calls, args.repeats)
    base = times["aiayn translate"]
    print(f"{translator!r}; {args.pairs} pairs, {args.threads} thread(s), median of {args.repeats}")
    print(f"{'call':40s} {'seconds':>8s} {'sent/s':>8s} {'x translate':>12s}")
    for name, t in times.items():
        print(f"{name:40s} {t:8.3f} {args.pairs / t:8.0f} {t / base:12.2f}")


if __name__ == "__main__":
    main()

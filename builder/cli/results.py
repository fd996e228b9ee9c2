"""aiayn results DIR: the Table-3-style table of the finished runs under DIR (markdown, CSV, plot)."""

import argparse
import sys
from pathlib import Path

from aiayn.builder.sweep.results import write_results


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("directory", type=Path, metavar="DIR", help="a sweep's directory (runs/table3) or any root of runs")
    p.add_argument(
        "--split",
        choices=("valid", "test"),
        help="the split ΔBLEU compares on; each run's translations of it are made where missing and kept in DIR/scores "
        "(default: test for a sweep that searched, since valid chose its settings; else valid, which the runs translated)",
    )
    p.add_argument(
        "--base",
        metavar="VARIANT",
        help="the row each ΔBLEU is measured from (default: the paper's base row, else the sweep's base experiment, else the first row)",
    )

    p.add_argument(
        "--bleu-parts",
        action="store_true",
        help="add each row's BLEU in parts (BP, 1-4-gram precisions; a line a seed, their mean ± std) and the 95%% interval "
        "of its mean over seeds and sentences against the experiment's reported BLEU",
    )


def results(args: argparse.Namespace) -> int:
    text = write_results(
        args.directory,
        args.base,
        args.split,
        report=lambda line: print(line, file=sys.stderr),
        registry=args.registry,
        bleu_parts=args.bleu_parts,
    )
    print(text, end="")
    print(f"wrote {args.directory / 'results.md'}, results.csv and results.png")
    if (args.directory / "study.journal").is_file():  # a sweep that searched: every trial in a browser
        print(f"optuna-dashboard {args.directory / 'study.journal'}   # every trial, its curve and the importances")
    return 0

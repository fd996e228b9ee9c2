"""aiayn data CORPUS [DIR] [--from FOLDER]: write a corpus as the line-aligned `{split}.{lang}`
files the shipped experiments read, by default into $AIAYN_DATA/CORPUS (else data/CORPUS),
where `data.dir: ${oc.env:AIAYN_DATA,data}/CORPUS` finds it."""

import argparse
import os
from pathlib import Path

from aiayn.builder.data.prepare.clean import CleanRules
from aiayn.builder.data.prepare.corpora import CORPORA, NEWS_COMMENTARY
from aiayn.builder.data.text import parse_steps
from aiayn.builder.errors import UserError

TREEBANK = "wsj"  # the Penn Treebank's WSJ trees, for the parsing experiment (builder/data/prepare/treebank.py)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("corpus", choices=sorted([*CORPORA, TREEBANK]), help="the corpus to prepare")
    p.add_argument(
        "dir", nargs="?", type=Path, metavar="DIR", help="where to write it (default: $AIAYN_DATA/CORPUS, else data/CORPUS)"
    )
    p.add_argument(
        "--from",
        dest="source",
        type=Path,
        metavar="FOLDER",
        help="read downloaded files from FOLDER instead of the Hugging Face Hub: the statmt.org archives "
        "(wmt14-en-de, wmt14-en-fr) or the github.com/multi30k/dataset repository (multi30k), or their extracted files; "
        "wsj: the Penn Treebank's WSJ .mrg files (required)",
    )
    p.add_argument("--force", action="store_true", help="replace DIR if it already holds files")
    add_cleaning_arguments(p)
    p.add_argument(
        "--pipeline",
        type=steps_argument,
        default=(),
        metavar="STEPS",
        help="put every line through these data.pipeline steps, comma-separated (lowercase, normalize_punctuation, "
        "moses_tokenize), recorded in prepared.json; the Multi30k literature's text: "
        "--pipeline lowercase,normalize_punctuation,moses_tokenize (default: none, the raw text)",
    )
    p.add_argument(
        "--news-commentary",
        choices=sorted(NEWS_COMMENTARY),
        default=None,
        help="wmt14-en-de: News Commentary v9 (WMT14's and the Hub's, default) or v12 (fairseq's script)",
    )


def add_cleaning_arguments(p: argparse.ArgumentParser) -> None:
    """How the training pairs are cleaned: Moses' clean-corpus-n's settings."""
    p.add_argument(
        "--clean",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="clean the training pairs as Moses' clean-corpus-n (default: on for wmt14-en-de, off for multi30k)",
    )
    p.add_argument("--min-len", type=int, default=1, metavar="N", help="fewest tokens a side of a training pair (default: 1)")
    p.add_argument("--max-len", type=int, default=250, metavar="N", help="most tokens a side of a training pair (default: 250)")
    p.add_argument(
        "--clean-ratio",
        type=float,
        default=1.5,
        metavar="R",
        help="most tokens of the longer side per token of the shorter (default: 1.5)",
    )
    p.add_argument(
        "--count",
        choices=("moses", "whitespace"),
        default="moses",
        help="what a token is for cleaning: Moses tokens, as fairseq's script makes them (default), or whitespace-separated words",
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        default=usable_cpus(),
        help="processes that count Moses tokens (default: the CPUs this process may use)",
    )


def steps_argument(text: str) -> list[str]:
    """--pipeline a,b,c: the names of data.pipeline's steps (read as steps by `steps`)."""
    return [name.strip() for name in text.split(",") if name.strip()]


def steps(args: argparse.Namespace) -> tuple:
    """--pipeline's steps, checked against the registered ones."""
    try:
        return parse_steps(args.pipeline, args.registry) if args.pipeline else ()
    except UserError as e:
        raise UserError(f"argument --pipeline: {e}") from None


def usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def changed(*settings: tuple[str, object, object]) -> list[str]:
    """The flags of (flag, value, default) that a command line set to other than their default."""
    return [flag for flag, value, default in settings if value != default]


def rules(args: argparse.Namespace, clean_by_default: bool) -> CleanRules | None:
    clean = clean_by_default if args.clean is None else args.clean
    given = changed(("--min-len", args.min_len, 1), ("--max-len", args.max_len, 250), ("--clean-ratio", args.clean_ratio, 1.5))
    if not clean:
        if given:
            raise UserError(
                f"{', '.join(given)} set{'s' if len(given) == 1 else ''} the cleaning, which is off; add --clean or drop {given[0]}"
            )
        return None
    if not 0 <= args.min_len <= args.max_len:
        raise UserError(f"need 0 <= --min-len <= --max-len, got --min-len {args.min_len} and --max-len {args.max_len}")
    if not args.clean_ratio >= 1:
        raise UserError(f"--clean-ratio ({args.clean_ratio:g}) must be at least 1: it bounds the longer side over the shorter")
    return CleanRules(args.min_len, args.max_len, args.clean_ratio, args.count)


def data(args: argparse.Namespace) -> int:
    from aiayn.builder.data.prepare.pipeline import prepare

    if args.corpus == TREEBANK:
        return treebank(args)
    if args.news_commentary is not None and args.corpus != "wmt14-en-de":
        raise UserError(f"--news-commentary is a choice of wmt14-en-de, not of {args.corpus}")
    corpus = CORPORA[args.corpus](args.news_commentary or "v9") if args.corpus == "wmt14-en-de" else CORPORA[args.corpus]()
    out = args.dir if args.dir is not None else Path(os.environ.get("AIAYN_DATA", "data")) / args.corpus
    if args.workers < 1:
        raise UserError(f"--workers ({args.workers}) must be at least 1")
    report = prepare(
        corpus,
        out,
        source=args.source,
        rules=rules(args, corpus.clean),
        force=args.force,
        workers=args.workers,
        pipeline=steps(args),
        registry=args.registry,
    )
    print("\n".join(report.lines()))
    return 0


def treebank(args: argparse.Namespace) -> int:
    """`aiayn data wsj --from TREEBANK [DIR]`: the parsing experiment's splits; the options of the
    parallel corpora do not apply."""
    from aiayn.builder.data.prepare.treebank import prepare_treebank

    given = changed(
        ("--clean", args.clean, None),
        ("--min-len", args.min_len, 1),
        ("--max-len", args.max_len, 250),
        ("--clean-ratio", args.clean_ratio, 1.5),
        ("--count", args.count, "moses"),
        ("--pipeline", args.pipeline, ()),
        ("--news-commentary", args.news_commentary, None),
    )
    if given:
        raise UserError(f"{given[0]} is a choice of the parallel corpora, not of wsj (its trees are read as they are)")
    if args.source is None:
        raise UserError(
            "wsj: give --from, the folder of your copy of the Penn Treebank's WSJ .mrg files (it is licensed: no download)"
        )
    out = args.dir if args.dir is not None else Path(os.environ.get("AIAYN_DATA", "data")) / TREEBANK
    print("\n".join(prepare_treebank(args.source, out, force=args.force)))
    return 0

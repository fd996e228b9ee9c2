"""aiayn translate RUN_OR_CKPT: beam-search each line of stdin (or --input) into stdout (or --output).

A run whose data.pipeline processes its text (lowercases, tokenizes) applies it to the input, and
its output is text of that kind, what its BLEU scores; --detokenize turns a tokenized output into
plain text (Moses' detokenizer). All input is read first (batching sorts sentences by length); output lines come in input order,
one per input line. A blank line (empty or whitespace only) gives an empty line. The progress bar
goes to stderr, only when translating a file (--input) and stderr is a terminal, so pipes and
logs stay clean.

--n-best K, --scores, --alignments: tab-separated columns, `index<TAB>score<TAB>text<TAB>alignment`,
each column only where asked for (the index, the input line's number from 0, with --n-best or
--scores): K lines per input line, best first (a blank input line: one empty translation, score
0). The score is what the beam search ranked by, log P(Y | X) / lp(|Y|) in natural log; the
alignment is Pharaoh's `i-j` word pairs (builder/decode/forced.py says from which attention).
"""

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError
from tqdm import tqdm

from aiayn.builder.cli.choice import add_choice_arguments, check_choice, decoding_from
from aiayn.builder.data.corpus import read_lines
from aiayn.builder.data.text import check_raw
from aiayn.builder.decode.device import resolve_device
from aiayn.builder.decode.forced import alignment_layers
from aiayn.builder.decode.load import load_run
from aiayn.builder.decode.strategy import check_n_best
from aiayn.builder.decode.translator import Translator, check_alignment_layer
from aiayn.builder.errors import UserError, check_input_file
from aiayn.builder.registry import registry_of
from aiayn.builder.run.atomic import check_writable, write_bytes_atomic
from aiayn.builder.run.outputs import check_output
from aiayn.schemas.decode import DecodeSpec
from aiayn.schemas.experiment import ExperimentSpec

# DecodeSpec field -> the flag that overrides it
DECODE_FLAGS = {
    "beam": "--beam",
    "alpha": "--alpha",
    "length_penalty": "--length-penalty",
    "max_len_a": "--max-len-a",
    "max_len_b": "--max-len-b",
    "max_tokens": "--max-tokens",
    "max_input_len": "--max-input-len",
}


def add_checkpoint_argument(p: argparse.ArgumentParser, *, ensemble: bool = False) -> None:
    """The model argument; `ensemble`: one or more of them (several decode as their ensemble)."""
    p.add_argument(
        "checkpoint",
        metavar="RUN_OR_CKPT",
        nargs="+" if ensemble else None,
        help="a trained model: a run directory (runs/<name>/version_<n>; runs/<name> means its latest version), a .ckpt "
        "file, or a Hugging Face folder (config.json, its weights and tokenizer: Marian, as opus-mt's, GPT-2 or Llama)"
        + ("; several: their ensemble (the mean of their next-token probabilities; one tokenizer)" if ensemble else ""),
    )


def add_decode_arguments(p: argparse.ArgumentParser, *, search: bool = True) -> None:
    """The decode section's flags; `search` False: those a search uses alone (--beam, --max-len-b) left out."""
    g = p.add_argument_group("decoding", "each overrides the experiment's decode section")
    if search:
        g.add_argument("--beam", type=int, help="beam size (paper: 4)")
    g.add_argument("--alpha", type=float, help="length penalty exponent (paper: 0.6)")
    g.add_argument(
        "--length-penalty",
        choices=("gnmt", "fairseq"),
        help="gnmt: ((5+|Y|)/6)^alpha (the paper's); fairseq: |Y|^alpha",
    )
    if search:
        g.add_argument("--max-len-a", type=float, help="output length <= a x input length + b (paper: 1; 0: b alone)")
        g.add_argument("--max-len-b", type=int, help="output length <= a x input length + this (paper: 50)")
    g.add_argument("--max-tokens", type=int, help="padded source tokens per batch")
    g.add_argument("--max-input-len", type=int, help="refuse input lines longer than this many tokens (default: 1024)")
    g.add_argument("--device", help="torch device (default: cuda if available, else cpu)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_checkpoint_argument(p, ensemble=True)
    p.add_argument("--input", "-i", type=Path, help="source text, one sentence per line (default: stdin)")
    p.add_argument("--output", "-o", type=Path, help="write translations here (default: stdout)")
    p.add_argument(
        "--detokenize",
        action="store_true",
        help="a run trained on tokenized text (data.pipeline: moses_tokenize): write plain text, detokenized by "
        "Moses' rules, instead of its tokenized output (lowercasing cannot be undone)",
    )
    g = p.add_argument_group("n-best lists, scores and alignments (tab-separated columns: index, score, text, alignment)")
    g.add_argument(
        "--n-best",
        type=int,
        metavar="K",
        help="the K best translations of each line, best first (K <= --beam); adds the index column",
    )
    g.add_argument(
        "--scores",
        action="store_true",
        help="add the index and the score each translation was ranked by: log P / lp(|Y|), natural log",
    )
    g.add_argument(
        "--alignments",
        action="store_true",
        help="append word alignments (Pharaoh i-j: source word i, output word j, 0-based) from the cross-attention",
    )
    g.add_argument(
        "--alignment-layer",
        type=int,
        metavar="L",
        help="the decoder layer whose cross-attention (heads averaged) aligns, from 0 (default: the penultimate of more than two, else the last)",
    )
    add_decode_arguments(p)
    add_choice_arguments(p)
    p.add_argument("--unique", action="store_true", help="each text once in a line's n-best list (its best segmentation)")


def decode_spec(spec: ExperimentSpec, args: argparse.Namespace) -> DecodeSpec:
    """The experiment's decode section with the command-line overrides, validated."""
    overrides = {field: getattr(args, field) for field in DECODE_FLAGS if getattr(args, field, None) is not None}
    try:
        return DecodeSpec.model_validate({**spec.decode.model_dump(), **overrides}, context=registry_of(spec).context)
    except ValidationError as e:
        error = e.errors()[0]
        field = str(error["loc"][0])
        message = error["msg"][0].lower() + error["msg"][1:]
        raise UserError(f"{DECODE_FLAGS.get(field, field)} ({overrides.get(field)}): {message}") from None


def device_of(args: argparse.Namespace) -> torch.device:
    """The device to decode on; on a CPU, with the cores that other processes leave free."""
    return resolve_device(args.device, "--device", share_cores=True)


def translation_model(model: Any, path: object) -> Translator:
    """`model` where it translates; a language model's run is a message that names the verbs for it."""
    if isinstance(path, list):
        path = path[0]
    model.check_verb("translate", path)
    return model


def read_input(path: Path | None) -> list[str]:
    """The lines of `path`, or of stdin, split on "\\n" only (as training read its corpus)."""
    if path is not None and str(path) != "-":
        return read_lines(path)
    data = sys.stdin.buffer.read()
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise UserError(f"stdin, line {line}: invalid UTF-8 (byte 0x{data[e.start]:02x}); the input must be UTF-8 text") from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def progress_bar(lines: Sequence[str], *, enabled: bool, what: str | None = None) -> tqdm:
    """Sentences translated so far (`what`: a later stage's, e.g. MBR's choices), on stderr (blank
    lines are not translated, so not counted)."""
    total = sum(1 for line in lines if line.strip())
    return tqdm(total=total, unit="sent", file=sys.stderr, disable=not enabled, desc=what)


def check_columns(args: argparse.Namespace, translator: Translator) -> Any:
    """--alignments and --detokenize checked against the model; its text pipelines."""
    if args.alignments and args.detokenize:
        raise UserError("--alignments counts the words of the run's tokenized output; drop --detokenize")
    if args.alignments or args.alignment_layer is not None:  # one model's cross-attention (forced.py says which not)
        check_alignment_layer(args.alignment_layer, alignment_layers(translator.model, "--alignments"), "--alignment-layer")
    pipelines = translator.pipelines
    if args.detokenize and (pipelines is None or pipelines[1].tokenizer is None):
        raise UserError(
            f"--detokenize: {args.checkpoint[0]} was trained on untokenized text (data.pipeline has no moses_tokenize); drop --detokenize"
        )
    return pipelines


def translate(args: argparse.Namespace) -> int:
    if args.output is not None:
        reads = [*args.checkpoint, *([args.input] if args.input is not None and str(args.input) != "-" else [])]
        check_writable(args.output, "--output")
        check_output(args.output, "--output", inputs=reads)
    if args.input is not None and str(args.input) != "-":
        check_input_file(args.input, "--input")
    check_choice(args)
    decoding = decoding_from(args)  # a filter or utility named by its flag, before the model loads
    translator = translation_model(load_run(args.checkpoint, device=device_of(args), registry=args.registry), args.checkpoint)
    decode = decode_spec(translator.spec, args)
    decoding = decoding.resolved(decode, args.registry)  # the run's decode.strategy where no flag names one
    assert decoding.strategy is not None
    check_n_best(args.n_best, decoding.strategy.n_best_limit(decode), "--n-best", "--beam")
    pipelines = check_columns(args, translator)
    if pipelines is not None and args.input is not None and str(args.input) != "-":
        check_raw(args.input, pipelines[0].steps, "give the raw text: the run applies its data.pipeline itself")
    lines = read_input(args.input)  # stdin is read once everything else checked out
    progress = args.input is not None and str(args.input) != "-" and sys.stderr.isatty()
    records = args.scores or args.alignments
    settings = decode.model_dump(exclude={"strategy", "beam"} if args.sampling else {"strategy"})  # decoding says how
    with (
        progress_bar(lines, enabled=progress) as bar,
        progress_bar(lines, enabled=progress and decoding.mbr is not None, what="MBR") as mbr,
    ):
        found = translator.translate(
            lines,
            n_best=args.n_best if (args.n_best or records or args.sampling) else None,
            with_scores=args.scores,
            alignments=args.alignments,
            alignment_layer=args.alignment_layer,
            detokenize=args.detokenize,
            decoding=decoding,
            on_batch=bar.update,
            on_choice=mbr.update,
            **settings,
        )
    text = "".join(line + "\n" for line in output_lines(found, args))
    if args.output is not None:
        write_bytes_atomic(args.output, text.encode("utf-8"))
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    if len(args.checkpoint) > 1 or Path(args.checkpoint[0]).is_dir():  # which of the runs' checkpoints that was
        used = translator.what if len(args.checkpoint) > 1 else f"{translator.checkpoint} ({translator.what})"
        print(f"aiayn translate: translated with {used}", file=sys.stderr)
    return 0


def output_lines(found: list, args: argparse.Namespace) -> list[str]:
    """The lines `aiayn translate` writes: the translation alone; with --n-best or --scores,
    the input's index (from 0) first and, with --scores, the score; with --alignments, the
    alignment last. Columns are separated by tabs."""
    listed = bool(args.n_best) and args.mbr is None  # a list a line, not one choice
    if not (listed or args.scores or args.alignments):
        return found if isinstance(found[0] if found else "", str) else [group[0] for group in found]
    rows = []
    for index, group in enumerate(found):
        for entry in group:
            text = entry if isinstance(entry, str) else entry.text
            columns = [str(index)] if (listed or args.scores) else []
            columns += [f"{entry.utility if args.mbr is not None else entry.score:.6f}"] if args.scores else []
            columns += [text] + ([entry.pharaoh()] if args.alignments else [])
            rows.append("\t".join(columns))
    return rows

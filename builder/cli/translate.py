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
import yaml
from pydantic import ValidationError
from tqdm import tqdm

from aiayn.builder.data.corpus import read_lines
from aiayn.builder.data.text import check_raw
from aiayn.builder.decode.device import resolve_device
from aiayn.builder.decode.mbr import WEIGHTS, utility_spec
from aiayn.builder.decode.sampling import Sampling, sampling_from, seed_argument
from aiayn.builder.decode.translator import MBRChoice, Translator, check_alignment_layer, check_n_best, load_run
from aiayn.builder.errors import UserError, resolved
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
        "file, or a Hugging Face Marian folder (config.json, its weights and tokenizer, as opus-mt's)"
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
        "--detokenize", action="store_true",
        help="a run trained on tokenized text (data.pipeline: moses_tokenize): write plain text, detokenized by "
        "Moses' rules, instead of its tokenized output (lowercasing cannot be undone)",
    )  # fmt: skip
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
        "--alignments", action="store_true",
        help="append word alignments (Pharaoh i-j: source word i, output word j, 0-based) from the cross-attention",
    )  # fmt: skip
    g.add_argument(
        "--alignment-layer", type=int, metavar="L",
        help="the decoder layer whose cross-attention (heads averaged) aligns, from 0 (default: the penultimate of more than two, else the last)",
    )  # fmt: skip
    add_decode_arguments(p)
    add_choice_arguments(p)
    p.add_argument("--unique", action="store_true", help="each text once in a line's n-best list (its best segmentation)")


def add_choice_arguments(p: argparse.ArgumentParser, *, n_best: bool = False) -> None:
    """--sampling and its flags, --mbr and its flags; `n_best`: with --n-best, MBR's candidates
    (evaluate's; translate has its own, for n-best lists)."""
    if n_best:
        p.add_argument(
            "--n-best", type=int, metavar="K", help="with --mbr: choose among K candidates (the beam's K best, or K samples)"
        )
    add_sampling_arguments(p)
    g = p.add_argument_group(
        "minimum-Bayes-risk decoding: of each line's --n-best K candidates (a beam's, or samples), the one that agrees most "
        "with the others"
    )
    g.add_argument(
        "--mbr", metavar="UTILITY",
        help="choose by MBR with this utility: chrf, bleu, a plugin's, or one with settings as YAML ('{type: chrf, word_order: 2}')",
    )  # fmt: skip
    g.add_argument(
        "--mbr-weights", choices=WEIGHTS, default="uniform",
        help="the pseudo-references' weights: uniform (default), or the model's probabilities renormalised over them",
    )  # fmt: skip
    g.add_argument(
        "--mbr-references", type=int, metavar="N",
        help="draw N samples as pseudo-references (default: the candidates themselves)",
    )  # fmt: skip


# the sampling flags, as the Python API names them
SAMPLING_FLAGS = {"temperature": "--temperature", "top_k": "--top-k", "top_p": "--top-p", "epsilon": "--epsilon"}


def add_sampling_arguments(p: argparse.ArgumentParser, *, switch: bool = True) -> None:
    """--sampling (where `switch`) and the flags that shape it, --seed."""
    g = p.add_argument_group("sampling (instead of beam search): each token drawn from the model's distribution")
    if switch:
        g.add_argument(
            "--sampling", action="store_true", help="draw --n-best K samples of each line (default 1) instead of searching"
        )
    g.add_argument("--temperature", type=float, metavar="T", help="divide the logits by T before sampling (default: 1)")
    g.add_argument("--top-k", type=int, metavar="K", help="sample among the K most probable tokens (default: all)")
    g.add_argument(
        "--top-p", type=float, metavar="P", help="sample among the fewest tokens whose probability reaches P (default: 1)"
    )
    g.add_argument("--epsilon", type=float, metavar="E", help="sample among the tokens of probability >= E (default: 0, all)")
    g.add_argument("--seed", type=int, default=1, help="the sampler's seed: the same seed, the same samples (default: 1)")


def sampling_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The sampling flags given, by their Python names, checked in the flags' words."""
    given = {name: getattr(args, name) for name in SAMPLING_FLAGS if getattr(args, name) is not None}
    seed_argument(args.seed, "--seed")
    try:
        sampling_from(**given)
    except UserError as e:
        name = str(e).split(" ", 1)[0].rstrip(":")
        raise UserError(str(e).replace(name, SAMPLING_FLAGS.get(name, name), 1)) from None
    return given


def check_choice(args: argparse.Namespace) -> None:
    """--sampling, --mbr and their flags: what goes with what."""
    shaping = [SAMPLING_FLAGS[name] for name in SAMPLING_FLAGS if getattr(args, name) is not None]
    if shaping and not args.sampling:
        raise UserError(f"{shaping[0]} shapes sampling; give --sampling, or drop it")
    if args.sampling and args.beam is not None:
        raise UserError("--beam: --sampling draws each token and keeps no beam; give one or the other")
    if args.mbr is None:
        for flag, given in (
            ("--mbr-references", args.mbr_references is not None),
            ("--mbr-weights", args.mbr_weights != "uniform"),
        ):
            if given:
                raise UserError(f"{flag} goes with --mbr; give --mbr UTILITY, or drop it")
        return
    if args.n_best is None or args.n_best < 2:
        raise UserError("--mbr chooses among candidates: give --n-best K >= 2 (the beam's K best, or K samples with --sampling)")
    if args.mbr_references is not None and args.mbr_references < 1:
        raise UserError(f"--mbr-references ({args.mbr_references}): give 1 or more samples to draw")
    if getattr(args, "alignments", False):
        raise UserError("--alignments: MBR's choice is written without them; align it with aiayn score --alignments")


def chosen(loaded: Any, lines: list[str], decode: DecodeSpec, args: argparse.Namespace, *, on_batch: Any) -> list[str] | None:
    """evaluate's translations of `lines` (through the run's pipeline already) where --sampling or
    --mbr chooses them (None: beam search's best, as validation translates)."""
    check_choice(args)
    if not args.sampling and args.mbr is None:
        if args.n_best is not None:
            raise UserError("--n-best: evaluate scores one translation a line; give it with --mbr (its candidates)")
        return None
    sampling = Sampling(**sampling_settings(args)) if args.sampling else None
    choice = None
    if args.mbr is not None:
        choice = MBRChoice(utility_spec(mbr_utility(args.mbr), "--mbr"), args.mbr_weights, args.mbr_references)
    translator = Translator(loaded.model, loaded.spec, loaded.src_tokenizer, loaded.tgt_tokenizer, loaded.checkpoint, loaded.what)
    k = args.n_best or 1
    with progress_bar(lines, enabled=choice is not None and sys.stderr.isatty(), what="MBR") as bar:
        _, _, texts, _ = translator.decode_lines(
            lines, decode, n_best=k, sampling=sampling, seed=args.seed, mbr=choice, on_batch=on_batch, on_choice=bar.update
        )
    return [group[0] for group in texts]


def choice_record(args: argparse.Namespace) -> dict[str, Any]:
    """What chose evaluate's translations besides the decode section, for its result."""
    record: dict[str, Any] = {}
    if args.sampling:
        record["sampling"] = {"seed": args.seed, **sampling_settings(args)}
    if args.mbr is not None:
        record["mbr"] = {"utility": utility_spec(mbr_utility(args.mbr), "--mbr").model_dump(), "candidates": args.n_best,
                         "weights": args.mbr_weights, "references": args.mbr_references or "the candidates"}  # fmt: skip
    return record


def mbr_utility(text: str) -> Any:
    """--mbr's value: a type name, or a YAML mapping with its settings."""
    text = text.strip()
    if not text.startswith("{"):
        return text
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        raise UserError(f"--mbr {text}: not a YAML mapping; give a type (chrf) or '{{type: chrf, word_order: 2}}'") from None
    return value


def decode_spec(spec: ExperimentSpec, args: argparse.Namespace) -> DecodeSpec:
    """The experiment's decode section with the command-line overrides, validated."""
    overrides = {field: getattr(args, field) for field in DECODE_FLAGS if getattr(args, field, None) is not None}
    try:
        return DecodeSpec.model_validate({**spec.decode.model_dump(), **overrides})
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
    if not isinstance(model, Translator):
        raise UserError(
            f"{path} is a language model (data.side: {model.spec.data.side}), which translates nothing: aiayn generate "
            "continues its text, aiayn evaluate gives its perplexity and bits per byte"
        )
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
    if (args.alignments or args.alignment_layer is not None) and len(args.checkpoint) > 1:
        raise UserError("--alignments: the members of an ensemble each attend their own way; align with one of its models")
    if args.alignment_layer is not None:
        check_alignment_layer(args.alignment_layer, len(translator.model.decoder.layers), "--alignment-layer")
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
    if args.input is not None and str(args.input) != "-" and not args.input.is_file():
        resolved(args.input)  # a link that leads back to itself is named as one
        raise UserError(f"--input {args.input}: no such file")
    check_choice(args)
    sampling = sampling_settings(args) if args.sampling else {}
    utility = utility_spec(mbr_utility(args.mbr), "--mbr") if args.mbr is not None else None
    translator = translation_model(load_run(args.checkpoint, device=device_of(args)), args.checkpoint)
    decode = decode_spec(translator.spec, args)
    check_n_best(args.n_best, None if args.sampling else decode.beam, "--n-best", "--beam")
    pipelines = check_columns(args, translator)
    if pipelines is not None and args.input is not None and str(args.input) != "-":
        check_raw(args.input, pipelines[0].steps, "give the raw text: the run applies its data.pipeline itself")
    lines = read_input(args.input)  # stdin is read once everything else checked out
    progress = args.input is not None and str(args.input) != "-" and sys.stderr.isatty()
    records = args.scores or args.alignments
    settings = decode.model_dump(exclude={"beam"} if args.sampling else set())
    with (
        progress_bar(lines, enabled=progress) as bar,
        progress_bar(lines, enabled=progress and utility is not None, what="MBR") as mbr,
    ):
        found = translator.translate(
            lines, n_best=args.n_best if (args.n_best or records or args.sampling) else None, with_scores=args.scores,
            alignments=args.alignments, alignment_layer=args.alignment_layer, detokenize=args.detokenize, on_batch=bar.update,
            sampling=args.sampling, seed=args.seed, unique=args.unique, mbr=utility, mbr_weights=args.mbr_weights,
            mbr_references=args.mbr_references, on_choice=mbr.update, **sampling, **settings,
        )  # fmt: skip
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

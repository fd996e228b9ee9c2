"""aiayn score RUN_OR_CKPT --src F --tgt F [--per-token] [--alignments]: forced decoding of given
targets (Marian's marian-scorer, fairseq's --score-reference, CTranslate2's score_batch).

One line per pair, tab-separated: log P(Y | X) (natural log, EOS included), |Y| (tokens, EOS
counted), with --per-token the log-probability of each target token then EOS's (space-separated),
with --alignments the word alignment (Pharaoh i-j), and last the score the beam search would rank
that target by: log P(Y | X) / lp(|Y|) under the decode settings' length penalty (--alpha,
--length-penalty override it as translate takes them). Source and target go through the run's
data.pipeline, as translate's input does. A blank source line is an error (nothing to condition
on); a blank target is the empty translation (EOS alone).

aiayn score RUN --text F [--per-token]: a language model's log-probability of each line of F
(`<s>` then its tokens then `</s>`, as `aiayn evaluate` counts a sentence): log P (natural log,
</s> included), the tokens predicted (</s> counted), with --per-token each one's log-probability,
and last the line's bits per byte (-log2 P over its UTF-8 bytes and a newline). Summed over the
lines, -log P / ln 2 over their bytes is evaluate's bits per byte of F.
"""

import argparse
import sys
from pathlib import Path

from aiayn.builder.cli.translate import (
    add_checkpoint_argument,
    add_decode_arguments,
    decode_spec,
    device_of,
    progress_bar,
    translation_model,
)
from aiayn.builder.data.corpus import check_aligned, read_lines
from aiayn.builder.data.text import check_raw
from aiayn.builder.decode.forced import alignment_layers
from aiayn.builder.decode.language_model import LanguageModel
from aiayn.builder.decode.load import load_run
from aiayn.builder.decode.translator import check_alignment_layer
from aiayn.builder.errors import UserError, check_input_file
from aiayn.builder.run.atomic import check_writable, write_bytes_atomic
from aiayn.builder.run.outputs import check_output


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_checkpoint_argument(p, ensemble=True)
    p.add_argument("--src", type=Path, help="source sentences, one per line (a translation model)")
    p.add_argument("--tgt", type=Path, help="the targets to score, line-aligned with --src")
    p.add_argument("--text", type=Path, help="a language model's text to score, one sentence per line (instead of --src/--tgt)")
    p.add_argument("--output", "-o", type=Path, help="write the scores here (default: stdout)")
    p.add_argument("--per-token", action="store_true", help="add a column: each target token's log-probability, then EOS's")
    p.add_argument("--alignments", action="store_true", help="add a column: the word alignment (Pharaoh i-j) of each pair")
    p.add_argument(
        "--alignment-layer",
        type=int,
        metavar="L",
        help="the decoder layer whose cross-attention (heads averaged) aligns, from 0 (default: the penultimate of more than two, else the last)",
    )
    add_decode_arguments(p, search=False)  # forced decoding searches nothing: no --beam, no --max-len-b


def score(args: argparse.Namespace) -> int:
    if args.text is not None:
        return _score_text(args)
    if args.src is None or args.tgt is None:
        raise UserError("give --src and --tgt (a translation model's pairs), or --text (a language model's lines)")
    if args.output is not None:
        check_writable(args.output, "--output")
        check_output(args.output, "--output", inputs=[*args.checkpoint, args.src, args.tgt])
    for flag, path in (("--src", args.src), ("--tgt", args.tgt)):
        check_input_file(path, flag)
    sources, targets = read_lines(args.src), read_lines(args.tgt)
    check_aligned(args.src, args.tgt, len(sources), len(targets))
    blank = next((i for i, line in enumerate(sources) if not line.strip()), None)
    if blank is not None:
        raise UserError(
            f"--src {args.src}, line {blank + 1} is blank: there is nothing to score its target against; drop that pair"
        )
    translator = translation_model(load_run(args.checkpoint, device=device_of(args), registry=args.registry), args.checkpoint)
    decode = decode_spec(translator.spec, args)
    if args.alignments or args.alignment_layer is not None:  # one model's cross-attention (forced.py says which not)
        check_alignment_layer(args.alignment_layer, alignment_layers(translator.model, "--alignments"), "--alignment-layer")
    pipelines = translator.pipelines
    if pipelines is not None:
        for path in (args.src, args.tgt):
            check_raw(path, pipelines[0].steps, "give the raw text: the run applies its data.pipeline itself")
    with progress_bar(sources, enabled=sys.stderr.isatty()) as bar:
        scores = translator.score(
            sources,
            targets,
            alignments=args.alignments,
            alignment_layer=args.alignment_layer,
            on_batch=bar.update,
            **decode.model_dump(),
        )
    rows = []
    for s in scores:
        columns = [f"{s.log_prob:.6f}", str(s.length)]
        columns += [" ".join(f"{x:.6f}" for x in s.token_log_probs)] if args.per_token else []
        columns += [s.pharaoh()] if args.alignments else []
        rows.append("\t".join([*columns, f"{s.score:.6f}"]) + "\n")
    return _write(args, "".join(rows))


def _score_text(args: argparse.Namespace) -> int:
    """`--text`: a language model's lines, each scored (the module's text)."""
    given = [flag for flag, on in (("--src", args.src), ("--tgt", args.tgt), ("--alignments", args.alignments)) if on]
    if given or args.alignment_layer is not None:
        raise UserError(f"--text scores a language model's lines alone: drop {(given or ['--alignment-layer'])[0]}")
    if len(args.checkpoint) > 1:
        raise UserError("--text: aiayn score takes one language model (an ensemble translates)")
    if args.output is not None:
        check_writable(args.output, "--output")
        check_output(args.output, "--output", inputs=[*args.checkpoint, args.text])
    check_input_file(args.text, "--text")
    lines = read_lines(args.text)
    if not lines:
        raise UserError(f"--text {args.text} is empty: it holds no sentences to score")
    model = load_run(args.checkpoint[0], device=device_of(args), registry=args.registry)
    model.check_verb("score --text", args.checkpoint[0])
    assert isinstance(model, LanguageModel)  # what scores --text
    scores = model.score(lines, max_tokens=args.max_tokens)
    rows = []
    for s in scores:
        columns = [f"{s.log_prob:.6f}", str(s.length)]
        columns += [" ".join(f"{x:.6f}" for x in s.token_log_probs)] if args.per_token else []
        rows.append("\t".join([*columns, f"{s.bpb:.6f}"]) + "\n")
    return _write(args, "".join(rows))


def _write(args: argparse.Namespace, text: str) -> int:
    if args.output is not None:
        write_bytes_atomic(args.output, text.encode("utf-8"))
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0

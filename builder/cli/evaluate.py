"""aiayn evaluate RUN_OR_CKPT [--split S | --src F --ref F] [--json]: sacreBLEU, chrF and perplexity.

BLEU and chrF are sacreBLEU's on detokenized text, each with its signature; a run whose
data.pipeline tokenizes is scored on its tokenized output against the tokenized reference
(tokenize none, lowercased where the pipeline lowercases: the Multi30k literature's BLEU), and its
detokenized output's sacreBLEU against the raw reference is shown beside it. Perplexity is
exp(mean NLL per target token, EOS included), teacher-forced on the (source, reference) pairs,
without label smoothing; pairs whose source is blank are left out of it (the encoder would have
nothing to attend to). Without --src/--ref it evaluates a split of the experiment (the test
split by default): the same numbers results.json holds for the validation split.
--tok-bleu adds the tokenized, compound-split BLEU that the paper and tensor2tensor reported,
clearly labelled: it is not comparable to sacreBLEU. --lc-bleu adds the lowercased, Moses-tokenized
BLEU that the Multi30k literature reports, labelled the same way.
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from aiayn.builder.cli.choice import (
    add_choice_arguments,
    check_choice,
    decoding_from,
    mbr_utility,
    sampling_settings,
    spec_argument,
)
from aiayn.builder.cli.translate import add_checkpoint_argument, add_decode_arguments, decode_spec, device_of, progress_bar
from aiayn.builder.data.corpus import check_not_blank, read_lines, read_parallel
from aiayn.builder.data.spec import gold_trees, split_texts
from aiayn.builder.data.text import check_raw, pipelines_of
from aiayn.builder.decode.checkpoint import HF_MODEL_TYPES, hf_model_type
from aiayn.builder.decode.evalb import tree_scores
from aiayn.builder.decode.load import load_models
from aiayn.builder.decode.mbr import utility_spec
from aiayn.builder.decode.metrics import Scoring, detokenized_bleu, evaluate_texts, literature_bleu, tokenized_bleu
from aiayn.builder.decode.strategy import BeamSearch
from aiayn.builder.decode.translator import Translator
from aiayn.builder.errors import UserError, check_input_file
from aiayn.builder.graph import graph_of
from aiayn.builder.run.atomic import check_writable, write_text_atomic
from aiayn.builder.run.outputs import check_output
from aiayn.schemas.decode import DecodeSpec


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_checkpoint_argument(p, ensemble=True)
    p.add_argument(
        "--split", choices=("valid", "test"), default="test", help="the experiment's split to evaluate (default: test)"
    )
    p.add_argument("--src", type=Path, help="source sentences, one per line (with --ref), instead of a split")
    p.add_argument("--ref", type=Path, help="reference translations, line-aligned with --src")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--tok-bleu",
        action="store_true",
        help="also report tokenized BLEU with compound splitting (##AT##-##AT##), as published "
        "numbers were computed; not comparable to sacreBLEU",
    )
    p.add_argument(
        "--lc-bleu",
        action="store_true",
        help="also report lowercased BLEU on Moses-tokenized text (sacremoses), as the Multi30k "
        "literature reports it; not comparable to sacreBLEU",
    )
    p.add_argument("--hyps", type=Path, help="also write the translations to this file (the text BLEU scores)")
    p.add_argument(
        "--hyps-from",
        type=Path,
        metavar="FILE",
        help="score these outputs (one a line, as aiayn translate writes them for this run) instead of translating: "
        "BLEU, chrF, PPL of the references, EVALB's F1 for a parser, exactly as the model's own",
    )
    p.add_argument(
        "--against",
        type=Path,
        metavar="FILE",
        help="another system's outputs of the same sentences: the BLEU difference with a paired bootstrap interval",
    )
    p.add_argument(
        "--pipeline",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="put --src and --ref through the run's data.pipeline (default); --no-pipeline: they are its output "
        "already (e.g. the Multi30k literature's tokenized files)",
    )
    add_decode_arguments(p)
    add_choice_arguments(p, n_best=True)


def evaluate(args: argparse.Namespace) -> int:
    _check_files(args)
    pair = read_parallel(args.src, args.ref) if args.src is not None else None
    _check_splits(args)
    loaded = load_models(args.checkpoint, args.registry)
    inference = graph_of(loaded.spec).inference(loaded)
    if not inference.reads_sources:  # a language model: its text alone, a split or --ref
        return _evaluate_language_model(args, loaded, inference)
    if args.ref is not None and args.src is None:
        raise UserError("--ref needs --src: give both, or neither to evaluate a split of the experiment")
    result = _evaluate_translations(args, loaded, pair)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


def _check_files(args: argparse.Namespace) -> None:
    """The files the flags name, before anything loads: inputs that exist, outputs that can be written."""
    if args.src is not None and args.ref is None:
        raise UserError("--src needs --ref: give both, or neither to evaluate a split of the experiment")
    for flag, path in (("--src", args.src), ("--ref", args.ref), ("--hyps-from", args.hyps_from), ("--against", args.against)):
        if path is not None:
            check_input_file(path, flag)
    if args.hyps_from is not None:
        given = [f for f, on in (("--sampling", args.sampling), ("--mbr", args.mbr), ("--strategy", args.strategy)) if on]
        if given or args.n_best is not None:
            raise UserError(f"{(given or ['--n-best'])[0]}: --hyps-from's outputs are scored as they are; drop one of them")
    if args.hyps is not None:
        check_writable(args.hyps, "--hyps")
        check_output(args.hyps, "--hyps", inputs=[p for p in (*args.checkpoint, args.src, args.ref) if p is not None])


def _evaluate_translations(args: argparse.Namespace, loaded: Any, pair: tuple[list[str], list[str]] | None) -> dict[str, Any]:
    """evaluate's result for a translation model: its own outputs (or --hyps-from's) scored against the references."""
    pipelines = pipelines_of(loaded.spec)
    sources, refs, raw_refs, data = _texts(args, loaded.spec, pipelines, pair)
    given = _outputs(args.hyps_from, "--hyps-from", len(refs))
    against = _outputs(args.against, "--against", len(refs))
    decode = decode_spec(loaded.spec, args)
    loaded.model.to(device_of(args))
    scoring = Scoring.of(loaded.spec.data)
    with progress_bar(sources, enabled=sys.stderr.isatty() and given is None) as bar:
        hyps = given if given is not None else chosen(loaded, sources, decode, args, on_batch=bar.update)
        metrics, hyps = evaluate_texts(
            loaded.model,
            loaded.src_tokenizer,
            loaded.tgt_tokenizer,
            sources,
            refs,
            decode,
            reading=graph_of(loaded.spec).reading(loaded.spec),
            scoring=scoring,
            on_batch=bar.update,
            hyps=hyps,
        )
    if args.hyps is not None:
        write_text_atomic(args.hyps, "".join(h + "\n" for h in hyps))
    outputs = {} if given is None else {"outputs": str(args.hyps_from)}
    result: dict[str, Any] = {
        "checkpoint": str(loaded.checkpoint),
        "model": loaded.what,
        "data": data,
        **outputs,
        **metrics,
        "decode": decode.model_dump(),
        **choice_record(args),
    }
    result.update(_other_bleus(args, loaded.spec, hyps, refs, raw_refs, pipelines, scoring))
    gold = gold_trees(loaded.spec.data, args.split) if pair is None else None
    if gold is not None:  # a parsing experiment's split: its trees scored as EVALB scores them, not by BLEU
        if against is not None:
            raise UserError("--against compares BLEU; a parsing experiment's outputs are scored by their brackets (EVALB)")
        result = {k: v for k, v in result.items() if k not in ("bleu", "signature", "chrf", "chrf_signature")}
        result.update(tree_scores(gold, hyps))
    if against is not None:
        result["against"] = compared_outputs(hyps, against, refs, scoring, str(args.against))
    return result


def _other_bleus(
    args: argparse.Namespace,
    spec: Any,
    hyps: list[str],
    refs: list[str],
    raw_refs: list[str] | None,
    pipelines: Any,
    scoring: Scoring,
) -> dict[str, Any]:
    """BLEU as others count it, beside sacreBLEU's: of the detokenized outputs against the raw
    references (a tokenized experiment's), --tok-bleu's and --lc-bleu's."""
    out: dict[str, Any] = {}
    if scoring.tokenized and raw_refs is not None and pipelines is not None:
        out.update(detokenized_bleu([pipelines[1].detokenize(h) for h in hyps], raw_refs))
    if args.tok_bleu:
        out.update(tokenized_bleu(hyps, refs))
    if args.lc_bleu:
        out.update(literature_bleu(hyps, refs, spec.data.tgt_lang))
    return out


def _outputs(path: Path | None, flag: str, count: int) -> list[str] | None:
    """A file of outputs, one a line, as many as the references (None: no file given)."""
    if path is None:
        return None
    lines = read_lines(path)
    if len(lines) != count:
        raise UserError(f"{flag} {path} has {len(lines)} lines, and there are {count} references: give one output a line")
    return lines


def compared_outputs(hyps: list[str], other: list[str], refs: list[str], scoring: Scoring, name: str) -> dict[str, Any]:
    """BLEU of `hyps` minus BLEU of `other` on the same references, with the paired bootstrap's 95% interval and
    p-value over the sentences (sacreBLEU's paired test: 1,000 resamples, its seed)."""
    from aiayn.builder.sweep.significance import SAMPLES, corpus_bleu, paired_bootstrap, sentence_stats

    mine, theirs = sentence_stats(hyps, refs, scoring), sentence_stats(other, refs, scoring)
    difference = paired_bootstrap([(theirs, mine)])
    return {
        "file": name,
        "bleu": round(corpus_bleu(theirs.sum(0)), 2),
        "delta_bleu": round(difference.delta, 2),
        "interval": [round(difference.low, 2), round(difference.high, 2)],
        "p": round(difference.p, 4),
        "samples": SAMPLES,
    }


def _texts(
    args: argparse.Namespace, spec: Any, pipelines: Any, given: tuple[list[str], list[str]] | None
) -> tuple[list[str], list[str], list[str] | None, str]:
    """(sources, references as the model reads them, the raw references where detokenized output
    can be scored against them, where they come from): --src/--ref (`given`), or a split."""
    if given is None:
        sources, refs, data = split_texts(spec, args.split)
        return sources, refs, split_texts(spec, args.split, raw=True)[1] if pipelines is not None else None, data
    data = f"{args.src} -> {args.ref}"
    if pipelines is None:
        return *given, given[1], data
    if not args.pipeline:
        return *given, None, data  # no raw reference to score the detokenized output against
    for path in (args.src, args.ref):
        check_raw(path, pipelines[0].steps, "give --no-pipeline to score it as it is")
    return pipelines[0].lines(given[0]), pipelines[1].lines(given[1]), given[1], f"{data}, through data.pipeline"


def _check_splits(args: argparse.Namespace) -> None:
    """A Hugging Face folder has no data splits: its text comes with --src and --ref (a language model's: --ref alone)."""
    kind = hf_model_type(Path(args.checkpoint[0]))
    if kind == "marian" and args.src is None:
        raise UserError(f"{args.checkpoint[0]} is a Hugging Face Marian model, which has no data splits: give --src and --ref")
    if kind is not None and kind != "marian" and args.ref is None:
        raise UserError(
            f"{args.checkpoint[0]} is a Hugging Face {HF_MODEL_TYPES[kind]} model, which has no data splits: give --ref TEXT"
        )


def _evaluate_language_model(args: argparse.Namespace, loaded: Any, inference: Any) -> int:
    """A model of one language's text scored on a split of it (its sentences, each <s> ... </s>,
    whatever data.packing trained it on), or on the lines of --ref: a language model's PPL and bits
    per byte, a masked language model's PPL and accuracy on the tokens it masks."""
    kind = inference.kind
    if args.src is not None:
        raise UserError(f"{args.checkpoint[0]} is {kind}: it reads no sources; give --ref FILE alone for its text, or a --split")
    for flag, path in (("--hyps-from", args.hyps_from), ("--against", args.against)):
        if path is not None:
            raise UserError(f"{flag}: {args.checkpoint[0]} is {kind}, whose evaluation scores its text, not outputs")
    spec = loaded.spec
    if args.ref is not None:
        lines, data = read_lines(args.ref), str(args.ref)
        if not lines:
            raise UserError(f"{args.ref} is empty: it holds no sentences to score")
        check_not_blank(args.ref, any(line.strip() for line in lines), len(lines))
    else:
        _, lines, data = split_texts(spec, args.split)  # a language model's split: its side's text, as both
    loaded.model.to(device_of(args))
    metrics = inference.text_scores(lines, spec.decode.max_tokens)
    result = {"checkpoint": str(loaded.checkpoint), "model": loaded.what, "data": data, **metrics}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"checkpoint  {result['checkpoint']} ({result['model']})\n" + "\n".join(inference.text_report(data, metrics)))
    return 0


def length_limit(d: dict[str, Any]) -> str:
    """The decode section's output limit in words: input + 50, 1.2 x input + 10, 511 tokens."""
    a, b = d.get("max_len_a", 1.0), d["max_len_b"]
    return f"{b} tokens" if a == 0 else f"input + {b}" if a == 1 else f"{a:g} x input + {b}"


def _search(r: dict[str, Any]) -> str:
    """How the translations were chosen, in words: the beam, sampling, MBR's choice among them."""
    sampling = r.get("sampling")
    shaped = ", ".join(f"{k} {v}" for k, v in (sampling or {}).items() if k != "seed")
    how = f"sampling ({shaped + ', ' if shaped else ''}seed {sampling['seed']})" if sampling else f"beam {r['decode']['beam']}"
    mbr = r.get("mbr")
    if mbr is None:
        return how
    weights = "" if mbr["weights"] == "uniform" else ", model-weighted"
    return f"MBR ({mbr['utility']['type']}{weights}) among {mbr['candidates']} candidates of {how}"


def _f(value: float | None, width: int = 0) -> str:
    """A score with two decimals; n/a where no sentence could be scored (EVALB's -nan)."""
    return f"{value:{width}.2f}" if value is not None else f"{'n/a':>{width}}"


def render(r: dict[str, Any]) -> str:
    d = r["decode"]
    lines = [
        f"checkpoint  {r['checkpoint']} ({r['model']})",
        f"data        {r['data']} ({r['n_sentences']} sentences)",
        f"outputs     {r['outputs']}, scored as given (not translated)"
        if "outputs" in r
        else f"decoding    {_search(r)}, {d['length_penalty']} length penalty alpha {d['alpha']}, max length {length_limit(d)}",
    ]
    if "parse_f1" in r:  # a parser is scored by its trees' brackets (EVALB), as the parsing literature scores it
        lines += [
            f"F1          {_f(r['parse_f1'], 6)}  bracketing (recall {_f(r['parse_recall'])}, precision "
            f"{_f(r['parse_precision'])}, complete match {_f(r['parse_complete_match'])}; {r['parse_errors']} error sentences: an "
            f"unbalanced, empty or misshapen tree, and {r.get('parse_skipped', 0)} skipped: no word kept, as EVALB counts them), "
            f"{r['parse_scorer']}",
            f"F1 repaired {_f(r['parse_f1_repaired'], 6)}  the outputs' brackets mended first (stray and empty ones dropped, open "
            f"ones closed; {r['parse_errors_repaired']} error sentences left): not EVALB's number",
        ]
    else:
        lines += [
            f"BLEU        {r['bleu']:6.2f}  sacreBLEU {r['signature']}"
            + ("  (on the tokenized text of the run's data.pipeline)" if "tok:none" in r["signature"] else ""),
            f"chrF        {r['chrf']:6.2f}  sacreBLEU {r['chrf_signature']}",
        ]
    lines.append(f"PPL         {r['ppl']:6.2f}  per target token, teacher-forced, no label smoothing")
    if "detok_bleu" in r:
        lines.append(
            f"detok BLEU  {r['detok_bleu']:6.2f}  the output detokenized (Moses), against the raw reference: "
            f"sacreBLEU {r['detok_bleu_signature']}"
        )
    if "tok_bleu" in r:
        lines.append(
            f"tok. BLEU   {r['tok_bleu']:6.2f}  tokenized (intl) with compound splitting, as published "
            "numbers; not comparable to sacreBLEU"
        )
    if "lc_bleu" in r:
        lines.append(
            f"lc. BLEU    {r['lc_bleu']:6.2f}  lowercased, Moses-tokenized, as the Multi30k literature reports; "
            f"not comparable to sacreBLEU ({r['lc_bleu_signature']})"
        )
    if "against" in r:
        a = r["against"]
        lines.append(
            f"against     {a['file']}: BLEU {a['bleu']:.2f}; this minus it {a['delta_bleu']:+.2f}, 95% interval "
            f"[{a['interval'][0]:+.2f}, {a['interval'][1]:+.2f}], p = {a['p']:.4f} (paired bootstrap, {a['samples']} resamples)"
        )
    return "\n".join(lines)


def chosen(loaded: Any, lines: list[str], decode: DecodeSpec, args: argparse.Namespace, *, on_batch: Any) -> list[str] | None:
    """evaluate's translations of `lines` (through the run's pipeline already) where --sampling or
    --mbr chooses them (None: beam search's best, as validation translates)."""
    check_choice(args)
    decoding = decoding_from(args).resolved(decode, args.registry)
    if decoding.strategy == BeamSearch() and args.mbr is None:
        if args.n_best is not None:
            raise UserError("--n-best: evaluate scores one translation a line; give it with --mbr (its candidates)")
        return None
    translator = Translator(loaded.model, loaded.spec, loaded.src_tokenizer, loaded.tgt_tokenizer, loaded.checkpoint, loaded.what)
    with progress_bar(lines, enabled=decoding.mbr is not None and sys.stderr.isatty(), what="MBR") as bar:
        _, _, texts, _ = translator.decode_lines(lines, decode, decoding, on_batch=on_batch, on_choice=bar.update)
    return [group[0] for group in texts]


def choice_record(args: argparse.Namespace) -> dict[str, Any]:
    """What chose evaluate's translations besides the decode section, for its result."""
    record: dict[str, Any] = {}
    if args.strategy is not None:
        record["strategy"] = spec_argument(args.strategy, "--strategy", "sampling", "{type: sampling, top_p: 0.9}")
    if args.sampling:
        record["sampling"] = {"seed": args.seed, **sampling_settings(args)}
    if args.mbr is not None:
        record["mbr"] = {
            "utility": utility_spec(mbr_utility(args.mbr), args.registry, "--mbr").model_dump(),
            "candidates": args.n_best,
            "weights": args.mbr_weights,
            "references": args.mbr_references or "the candidates",
        }
    return record

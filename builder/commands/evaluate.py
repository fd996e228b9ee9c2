"""aiayn evaluate RUN_OR_CKPT [--src F --ref F] [--json]: sacreBLEU, chrF and perplexity.

BLEU and chrF are sacreBLEU's on detokenized text, each with its signature. Perplexity is
exp(mean NLL per target token, EOS included), teacher-forced on the (source, reference) pairs,
without label smoothing; pairs whose source is blank are left out of it (the encoder would have
nothing to attend to). Without --src/--ref it evaluates the experiment's test split: the files
{data.dir}/{data.test}.{src_lang|tgt_lang}, or the demo corpus's test split regenerated from its
sizes and seed. --tok-bleu adds the tokenized, compound-split BLEU that the paper and
tensor2tensor reported, clearly labelled: it is not comparable to sacreBLEU.
"""

import argparse
import json
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import sacrebleu

from builder.checkpoint import load_for_inference
from builder.commands.translate import add_checkpoint_argument, add_decode_arguments, decode_spec, device_of
from builder.commands.translate import translate_lines
from builder.data.collate import Batch, TranslationCollator
from builder.data.corpus import read_parallel
from builder.data.dataset import Example
from builder.data.demo import generate_demo
from builder.data.tokenizer import Tokenizer
from builder.errors import UserError
from builder.evaluate import perplexity, score
from builder.translate import check_lengths
from schemas.data import DemoDataSpec
from schemas.experiment import ExperimentSpec

_COMPOUND = re.compile(r"(\S)-(\S)")  # tensor2tensor's get_ende_bleu.sh: a-b -> a ##AT##-##AT## b


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_checkpoint_argument(p)
    p.add_argument("--src", type=Path, help="source sentences, one per line (with --ref)")
    p.add_argument("--ref", type=Path, help="reference translations, line-aligned with --src")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--tok-bleu", action="store_true",
        help="also report tokenized BLEU with compound splitting (##AT##-##AT##), as published "
        "numbers were computed; not comparable to sacreBLEU",
    )
    p.add_argument("--hyps", type=Path, help="also write the translations to this file")
    add_decode_arguments(p)


def test_split(spec: ExperimentSpec) -> tuple[list[str], list[str], str]:
    """(sources, references, description) of the experiment's test split."""
    data = spec.data
    if isinstance(data, DemoDataSpec):
        sources, refs = generate_demo(data.n_train, data.n_valid, data.n_test, data.seed)["test"]
        return sources, refs, f"the demo corpus's test split, seed {data.seed}"
    prefix = Path(data.dir) / data.test
    src, ref = Path(f"{prefix}.{data.src_lang}"), Path(f"{prefix}.{data.tgt_lang}")
    sources, refs = read_parallel(src, ref)
    return sources, refs, f"{src} -> {ref}"


def teacher_forcing_batches(
    src_ids: Sequence[Sequence[int]], tgt_ids: Sequence[Sequence[int]], tokenizer: Tokenizer, max_tokens: int
) -> Iterator[Batch]:
    """Batches of at most ~max_tokens padded tokens per side, longest first; blank sources skipped."""
    collate = TranslationCollator(pad_id=tokenizer.pad_id, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id)
    width = [max(len(s), len(t) + 1) for s, t in zip(src_ids, tgt_ids)]
    order = sorted((i for i in range(len(src_ids)) if src_ids[i]), key=lambda i: -width[i])
    start = 0
    while start < len(order):
        chunk = order[start : start + max(1, max_tokens // width[order[start]])]
        yield collate([Example(i, np.asarray(src_ids[i], np.int32), np.asarray(tgt_ids[i], np.int32)) for i in chunk])
        start += len(chunk)


def tokenized_bleu(hyps: Sequence[str], refs: Sequence[str]) -> tuple[sacrebleu.metrics.BLEU, Any]:
    """BLEU on intl-tokenized text with hyphenated compounds split, as tensor2tensor reported it."""

    def split(line: str) -> str:
        return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", line)

    bleu = sacrebleu.metrics.BLEU(tokenize="intl")
    return bleu, bleu.corpus_score([split(h) for h in hyps], [[split(r) for r in refs]])


def evaluate(args: argparse.Namespace) -> int:
    if (args.src is None) != (args.ref is None):
        given, missing = ("--src", "--ref") if args.src is not None else ("--ref", "--src")
        raise UserError(f"{given} needs {missing}: give both, or neither to evaluate the experiment's test split")
    if args.src is not None:
        sources, refs = read_parallel(args.src, args.ref)
    loaded = load_for_inference(args.checkpoint)
    if args.src is not None:
        data = f"{args.src} -> {args.ref}"
    else:
        sources, refs, data = test_split(loaded.spec)
    decode = decode_spec(loaded.spec, args)
    loaded.model.to(device_of(args))
    hyps = translate_lines(loaded, sources, decode, progress=sys.stderr.isatty(), what="source")
    if args.hyps is not None:
        args.hyps.parent.mkdir(parents=True, exist_ok=True)
        args.hyps.write_text("".join(h + "\n" for h in hyps), encoding="utf-8")

    src_ids = loaded.src_tokenizer.encode_batch([s if s.strip() else "" for s in sources])
    tgt_ids = loaded.tgt_tokenizer.encode_batch(refs)
    check_lengths(loaded.model, [len(t) + 1 for t in tgt_ids], "reference")
    batches = teacher_forcing_batches(src_ids, tgt_ids, loaded.tgt_tokenizer, decode.max_tokens)
    result: dict[str, Any] = {
        "checkpoint": str(loaded.checkpoint),
        "data": data,
        "n_sentences": len(refs),
        **score(hyps, refs),
        "ppl": round(perplexity(loaded.model, batches), 4),
        "decode": decode.model_dump(),
    }
    if args.tok_bleu:
        bleu, tok = tokenized_bleu(hyps, refs)
        result["tok_bleu"] = round(tok.score, 2)
        result["tok_bleu_signature"] = f"{bleu.get_signature()}|compound-split:##AT##"
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


def render(r: dict[str, Any]) -> str:
    d = r["decode"]
    lines = [
        f"checkpoint  {r['checkpoint']}",
        f"data        {r['data']} ({r['n_sentences']} sentences)",
        f"decoding    beam {d['beam']}, {d['length_penalty']} length penalty alpha {d['alpha']}, "
        f"max length input + {d['max_len_b']}",
        f"BLEU        {r['bleu']:6.2f}  sacreBLEU {r['signature']}",
        f"chrF        {r['chrf']:6.2f}  sacreBLEU {r['chrf_signature']}",
        f"PPL         {r['ppl']:6.2f}  per target token, teacher-forced, no label smoothing",
    ]
    if "tok_bleu" in r:
        lines.append(
            f"tok. BLEU   {r['tok_bleu']:6.2f}  tokenized (intl) with compound splitting, as published "
            "numbers; not comparable to sacreBLEU"
        )
    return "\n".join(lines)

"""BLEU (sacreBLEU, with its signature), chrF and perplexity of a model on a split."""

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import sacrebleu
import torch

from blocks import EncoderDecoder
from builder.loss import label_smoothed_nll
from builder.translate import translate_ids
from schemas.decode import DecodeSpec


def translate_texts(
    model: EncoderDecoder,
    tokenizer: Any,
    lines: Sequence[str],
    decode: DecodeSpec,
    *,
    tgt_tokenizer: Any = None,
    on_batch: Callable[[int], None] | None = None,
) -> list[str]:
    """Source lines -> detokenized translations; `tgt_tokenizer` when the vocabularies differ."""
    tgt_tokenizer = tgt_tokenizer or tokenizer
    ids = [tokenizer.encode(line) for line in lines]
    was_training = model.training
    model.eval()
    try:
        out = translate_ids(model, ids, decode, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id, on_batch=on_batch)
    finally:
        model.train(was_training)
    return [tgt_tokenizer.decode(hyp) for hyp in out]


def score(hyps: Sequence[str], refs: Sequence[str]) -> dict[str, Any]:
    """sacreBLEU's BLEU and chrF on detokenized text, with BLEU's signature."""
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    return {
        "bleu": round(bleu.corpus_score(list(hyps), [list(refs)]).score, 2),
        "chrf": round(chrf.corpus_score(list(hyps), [list(refs)]).score, 2),
        "signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }


@torch.no_grad()
def perplexity(model: EncoderDecoder, batches: Iterable[Any]) -> float:
    """exp of the mean per-target-token NLL, no label smoothing, padding excluded."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    nll_sum, count = 0.0, 0
    try:
        for batch in batches:
            logits = model(batch.src.to(device), batch.tgt_in.to(device))
            _, nll, n = label_smoothed_nll(logits, batch.tgt_out.to(device), eps=0.0, pad_id=model.pad_id)
            nll_sum, count = nll_sum + nll.item(), count + int(n)
    finally:
        model.train(was_training)
    return math.exp(nll_sum / max(count, 1))


def evaluate_split(model: EncoderDecoder, data: Any, split: str, decode: DecodeSpec) -> dict[str, Any]:
    """BLEU, chrF and perplexity of `model` on a split of a TranslationDataModule."""
    from builder.datasets import eval_loader, split_texts

    sources, refs = split_texts(data, split)
    hyps = translate_texts(model, data.src_tokenizer, sources, decode, tgt_tokenizer=data.tgt_tokenizer)
    return {**score(hyps, refs), "ppl": round(perplexity(model, eval_loader(data, split)), 4), "n_sentences": len(refs)}

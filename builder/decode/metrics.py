"""BLEU and chrF (sacreBLEU, with their signatures) and perplexity of a model on parallel text.

`evaluate_texts` is what results.json and `aiayn evaluate` report: translations through the one
translate path, scores on detokenized text, and perplexity teacher-forced on the same batches
the validation loop reads (data/loaders.py).
"""

import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import sacrebleu
import torch

from aiayn.blocks import TransformerModel
from aiayn.builder.data.dataset import TranslationDataset
from aiayn.builder.data.loaders import eval_loader
from aiayn.builder.data.ragged import RaggedIds
from aiayn.builder.data.reading import Reading
from aiayn.builder.data.scoring import DETOKENIZED, Scoring
from aiayn.builder.data.tokenizer import Tokenizer
from aiayn.builder.decode.translate import check_lengths, evaluating, translate_texts
from aiayn.builder.model.loss import label_smoothed_nll, prefix_of
from aiayn.schemas.decode import DecodeSpec

_COMPOUND = re.compile(r"(\S)-(\S)")  # tensor2tensor's get_ende_bleu.sh: a-b -> a ##AT##-##AT## b


def score(hyps: Sequence[str], refs: Sequence[str], scoring: Scoring = DETOKENIZED) -> dict[str, Any]:
    """sacreBLEU's BLEU and chrF as `scoring` says, with their signatures."""
    bleu, chrf = scoring.bleu(), scoring.chrf()
    return {
        "bleu": round(bleu.corpus_score(list(hyps), [list(refs)]).score, 2),
        "chrf": round(chrf.corpus_score(list(hyps), [list(refs)]).score, 2),
        "signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }


def detokenized_bleu(hyps: Sequence[str], refs: Sequence[str]) -> dict[str, Any]:
    """sacreBLEU (13a, cased) of a tokenized run's output, detokenized, against the raw reference:
    the number a run on raw text reports, beside the tokenized run's own."""
    bleu = sacrebleu.metrics.BLEU()
    return {
        "detok_bleu": round(bleu.corpus_score(list(hyps), [list(refs)]).score, 2),
        "detok_bleu_signature": str(bleu.get_signature()),
    }


def tokenized_bleu(hyps: Sequence[str], refs: Sequence[str]) -> dict[str, Any]:
    """BLEU on intl-tokenized text with hyphenated compounds split, as tensor2tensor reported it."""

    def split(line: str) -> str:
        return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", line)

    bleu = sacrebleu.metrics.BLEU(tokenize="intl")
    result = bleu.corpus_score([split(h) for h in hyps], [[split(r) for r in refs]])
    return {"tok_bleu": round(result.score, 2), "tok_bleu_signature": f"{bleu.get_signature()}|compound-split:##AT##"}


def literature_bleu(hyps: Sequence[str], refs: Sequence[str], lang: str) -> dict[str, Any]:
    """Lowercased BLEU on Moses-tokenized text, as the Multi30k literature reports it (fairseq's
    BLEU after sacremoses and lowercasing): hypotheses and references are tokenized by
    sacremoses' MosesTokenizer for `lang` (no escaping), then scored by sacreBLEU with
    tokenize="none" and lowercase=True. Not comparable to the cased, detokenized sacreBLEU."""
    from sacremoses import MosesTokenizer

    moses = MosesTokenizer(lang=lang)

    def tokenized(line: str) -> str:
        return moses.tokenize(line, escape=False, return_str=True)

    bleu = Scoring(tokenized=True, lowercase=True).bleu()
    result = bleu.corpus_score([tokenized(h) for h in hyps], [[tokenized(r) for r in refs]])
    return {"lc_bleu": round(result.score, 2), "lc_bleu_signature": f"{bleu.get_signature()}|pre:sacremoses-{lang}"}


def perplexity(model: TransformerModel, batches: Iterable[Any]) -> float:
    """exp of the mean per-target-token NLL, no label smoothing, padding excluded."""
    device = next(model.parameters()).device
    nll_sum, count = 0.0, 0
    with evaluating(model):
        for batch in batches:
            prefix = {k: v.to(device) for k, v in prefix_of(batch).items()}
            logits = model(batch.src.to(device), batch.tgt_in.to(device), **prefix)
            _, nll, n = label_smoothed_nll(logits, batch.tgt_out.to(device), eps=0.0, pad_id=model.pad_id)
            nll_sum, count = nll_sum + nll.item(), count + int(n)
    return math.exp(nll_sum / max(count, 1))


def teacher_forced(
    src_ids: Sequence[Sequence[int]],
    tgt_ids: Sequence[Sequence[int]],
    max_tokens: int,
    *,
    source_eos: int | None = None,
    reading: Reading | None = None,
    tokenizer: Tokenizer | None = None,
) -> Any:
    """The evaluation batches of these pairs (each source followed by `source_eos`, if given), as
    `reading` lays them out (a graph's; None: read apart, the encoder-decoder's) with `tokenizer`'s
    specials; pairs with an empty source are left out (the encoder would have nothing to attend
    to), as in the validation loop."""
    from aiayn.builder.data.loaders import loader_options

    src, tgt = RaggedIds.from_lists(src_ids), RaggedIds.from_lists(tgt_ids)
    dataset = TranslationDataset(src, tgt, np.flatnonzero(src.lengths > 0), source_eos=source_eos)
    reading = reading if reading is not None else Reading()
    collate = reading.collate(tokenizer, 1) if tokenizer is not None else None
    options = loader_options(0, False) if collate is None else {**loader_options(0, False), "collate_fn": collate}
    return eval_loader(dataset, max_tokens, lengths=reading.eval_lengths(dataset), **options)


def evaluate_texts(
    model: TransformerModel,
    src_tokenizer: Tokenizer,
    tgt_tokenizer: Tokenizer,
    sources: Sequence[str],
    refs: Sequence[str],
    decode: DecodeSpec,
    *,
    reading: Reading | None,
    scoring: Scoring = DETOKENIZED,
    on_batch: Callable[[int], None] | None = None,
    hyps: Sequence[str] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """({n_sentences, bleu, chrf, signatures, ppl}, the translations) of `sources` against `refs`
    (`hyps`: translations chosen otherwise, scored as they are); the perplexity is of the targets
    as the model's `reading` lays out a pair (its graph's `Graph.reading`)."""
    hyps = (
        list(hyps)
        if hyps is not None
        else translate_texts(model, src_tokenizer, tgt_tokenizer, sources, decode, on_batch=on_batch)
    )
    src_ids = src_tokenizer.encode_batch([s if s.strip() else "" for s in sources])
    tgt_ids = tgt_tokenizer.encode_batch(list(refs))
    check_lengths(model, [len(t) + 1 for t in tgt_ids], "reference")
    on_target = (reading if reading is not None else Reading()).on_target()  # the loss of the target alone
    batches = teacher_forced(
        src_ids, tgt_ids, decode.max_tokens, source_eos=model.source_eos_id, reading=on_target, tokenizer=tgt_tokenizer
    )
    ppl = perplexity(model, batches)
    return {"n_sentences": len(refs), **score(hyps, refs, scoring), "ppl": round(ppl, 4)}, hyps


def language_model_scores(model: Any, batches: Any, tokens_per_byte: float) -> dict[str, Any]:
    """A language model's teacher-forced scores over `batches` (a split's loader): per-token NLL
    (nats), PPL = exp of it, and bits per byte = NLL x tokens per byte / ln 2 (comparable across
    tokenizers); `n_tokens`, the tokens predicted, and `n_sentences`, the rows read."""
    from aiayn.builder.model.loss import batch_loss

    device = next(model.parameters()).device
    nll, count, rows = 0.0, 0, 0
    with evaluating(model):
        for batch in batches:
            batch = type(batch)(*(t.to(device) if isinstance(t, torch.Tensor) else t for t in batch))
            _, total, n = batch_loss(model, batch, eps=0.0, pad_id=model.pad_id)
            nll, count, rows = nll + float(total), count + int(n), rows + batch.tgt_in.size(0)
    per_token = nll / max(count, 1)
    return {
        "loss": per_token,
        "ppl": math.exp(per_token),
        "bpb": per_token * tokens_per_byte / math.log(2),
        "n_tokens": count,
        "n_sentences": rows,
    }


def line_log_probs(model: Any, tokenizer: Any, lines: Sequence[str], max_tokens: int) -> list[list[float]]:
    """Each line's token log-probabilities as a language model reads it (`<s> ... </s>`: its
    tokens', then </s>'s), batched and teacher-forced as `text_scores` counts them; a blank line's
    are none."""
    ids = RaggedIds.from_lists(tokenizer.encode_batch(list(lines)))
    dataset = TranslationDataset(ids, ids, np.flatnonzero(ids.lengths > 0), source=False)
    found: list[list[float]] = [[] for _ in lines]
    device = next(model.parameters()).device
    with evaluating(model):
        for batch in eval_loader(dataset, max_tokens):
            logits = model(batch.src.to(device), batch.tgt_in.to(device))  # (B, T, V)
            log_probs = logits.float().log_softmax(-1).gather(-1, batch.tgt_out.to(device)[..., None]).squeeze(-1)
            for row, i in enumerate(batch.ids.tolist()):
                found[i] = log_probs[row, : int(batch.tgt_out[row].ne(model.pad_id).sum())].tolist()
    return found


def text_scores(model: Any, tokenizer: Any, lines: Sequence[str], max_tokens: int) -> dict[str, Any]:
    """`language_model_scores` of text lines, each one sentence (<s> ... </s>); blank lines are
    skipped, their bytes (a newline) too, as the validation of a run trained on sentences skips them."""
    from aiayn.builder.data.contiguous import text_bytes
    from aiayn.builder.data.loaders import loader_options

    ids = RaggedIds.from_lists(tokenizer.encode_batch(list(lines)))
    dataset = TranslationDataset(ids, ids, np.flatnonzero(ids.lengths > 0), source=False)
    predicted = int(dataset.tgt_lengths.sum()) + len(dataset)
    batches = eval_loader(dataset, max_tokens, **loader_options(0, False))
    return language_model_scores(model, batches, predicted / max(text_bytes([lines[i] for i in dataset.ids]), 1))


@torch.no_grad()
def masked_lm_scores(model: Any, batches: Any) -> dict[str, Any]:
    """A masked language model's scores over `batches` (a split's loader, masked as the collator masks
    it): the predicted tokens' mean NLL (nats), PPL = exp of it, and accuracy (the most probable
    token is the original: mlm_accuracy); `mlm_tokens`, the tokens predicted, and `n_sentences`, the rows read."""
    device = next(model.parameters()).device
    nll, right, count, rows = 0.0, 0, 0, 0
    with evaluating(model):
        for batch in batches:
            src, where = batch.src.to(device), batch.tgt_rows.to(device)
            target = batch.tgt_out.to(device).flatten().index_select(0, where)
            logits = model(src, None, where).float()  # (n, V) at the predicted positions
            nll += float(torch.nn.functional.cross_entropy(logits, target, reduction="sum"))
            right += int(logits.argmax(-1).eq(target).sum())
            count, rows = count + int(target.numel()), rows + src.size(0)
    per_token = nll / max(count, 1)
    return {
        "loss": per_token,
        "ppl": math.exp(per_token),
        "mlm_accuracy": right / max(count, 1),
        "mlm_tokens": count,
        "n_sentences": rows,
    }

"""What a request would hold in memory, from the model's dims (builder/model/size.py's `decode_memory`):
its largest decoding batch, which the server refuses above --max-batch-memory-gb before it decodes,
and its work (its lines decoded all at once), by which the batcher puts it in its heavy lane."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiayn.builder.model.size import decode_memory
from aiayn.builder.serve.messages import GenerateRequest, ScoreRequest, TranslateRequest
from aiayn.builder.serve.served import Served


@dataclass(frozen=True)
class Estimate:
    """Upper bounds, in bytes, of a request's decoding.

    :param batch: its largest batch holds (None: it decodes nothing step by step: a score)
    :param rows: that batch's rows (sources times the beam or candidates)
    :param positions: each row's positions (the longest input and its longest output)
    :param work: its lines would hold decoded all at once: how heavy the request is"""

    batch: int | None
    rows: int
    positions: int
    work: int


def estimate(one: Served, body: Any) -> Estimate:
    """The request's Estimate: its sources of the longest line's length, as many as decode.max_tokens holds,
    times the widest of its beam, n-best and MBR's references, over the longest line and its longest output."""
    decode, spec, members = one.model.spec.decode, one.model.spec.model, len(one.paths)
    if isinstance(body, ScoreRequest):  # forced: one pass over each pair, no search
        texts = body.text if body.text is not None else body.src or []
        targets = body.tgt or []
        longest = _longest(one, texts) + (_longest(one, targets, output=True) if targets else 0)
        return Estimate(None, len(texts), longest, decode_memory(spec, len(texts), longest) * members)
    if isinstance(body, TranslateRequest):
        texts, copies = body.lines, max(body.beam or decode.beam, body.n_best or 1, body.mbr_references or 1)
        longest = _longest(one, texts)
        a = decode.max_len_a if body.max_len_a is None else body.max_len_a
        b = decode.max_len_b if body.max_len_b is None else body.max_len_b
        sources, output = min(len(texts), max(1, (body.max_tokens or decode.max_tokens) // longest)), int(a * longest) + b
    else:  # prompts of one length go through together
        assert isinstance(body, GenerateRequest)
        texts, copies = body.prompts, decode.beam if (body.strategy is not None and not body.greedy) else 1
        longest = _longest(one, texts)
        sources, output = len(texts), body.max_new_tokens
    rows, positions = sources * copies, longest + output
    work = decode_memory(spec, len(texts) * copies, positions) * members
    return Estimate(decode_memory(spec, rows, positions) * members, rows, positions, work)


def _longest(one: Served, texts: Any, output: bool = False) -> int:
    tokenizer = one.model.output_tokenizer if output else one.model.input_tokenizer
    return max((len(ids) + 1 for ids in tokenizer.encode_batch(list(texts))), default=1)

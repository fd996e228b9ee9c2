"""What a decoding request would hold in memory at most, from the model's dims (builder/model/size.py's
`decode_memory`), so that the server refuses one above --max-batch-memory-gb before it decodes."""

from __future__ import annotations

from typing import Any

from aiayn.builder.model.size import decode_memory
from aiayn.builder.serve.messages import GenerateRequest, TranslateRequest
from aiayn.builder.serve.served import Served


def batch_memory(one: Served, body: Any) -> tuple[int, int, int] | None:
    """(bytes, rows, positions) of the largest batch a /translate or /generate request decodes, upper bounds: its
    sources of the longest line's length, as many as decode.max_tokens holds, times the widest of its beam,
    n-best and MBR's references, over the longest line and its longest output; None for what decodes nothing."""
    decode = one.model.spec.decode
    if isinstance(body, TranslateRequest):
        texts, copies = body.lines, max(body.beam or decode.beam, body.n_best or 1, body.mbr_references or 1)
    elif isinstance(body, GenerateRequest):
        texts, copies = body.prompts, decode.beam if (body.strategy is not None and not body.greedy) else 1
    else:
        return None
    longest = max(len(ids) + 1 for ids in one.model.input_tokenizer.encode_batch(list(texts)))
    if isinstance(body, TranslateRequest):
        a = decode.max_len_a if body.max_len_a is None else body.max_len_a
        b = decode.max_len_b if body.max_len_b is None else body.max_len_b
        sources = min(len(texts), max(1, (body.max_tokens or decode.max_tokens) // longest))
        output = int(a * longest) + b
    else:  # prompts of one length go through together
        sources, output = len(texts), body.max_new_tokens
    rows, positions = sources * copies, longest + output
    return decode_memory(one.model.spec.model, rows, positions) * len(one.paths), rows, positions

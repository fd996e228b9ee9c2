"""Text in, text out: batch sentences by tokens, beam search, detokenize, keep input order."""

from collections.abc import Callable, Sequence

import torch

from blocks import EncoderDecoder
from builder.errors import UserError
from builder.search import beam_search
from schemas.decode import DecodeSpec


def source_tensor(rows: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([list(r) + [pad_id] * (width - len(r)) for r in rows], dtype=torch.long)


def check_lengths(model: EncoderDecoder, lengths: Sequence[int], what: str) -> None:
    """A learned position table has no row past its end: name the first line that is too long."""
    positions = getattr(model.src_embed.positional, "max_len", None)  # None: sinusoids never end
    if positions is None:
        return
    for i, n in enumerate(lengths):
        if n > positions:
            raise UserError(
                f"{what} line {i + 1} has {n} tokens but the model's learned positions cover only "
                f"{positions}; shorten or split that line"
            )


@torch.no_grad()
def translate_ids(
    model: EncoderDecoder,
    sources: Sequence[Sequence[int]],
    decode: DecodeSpec,
    *,
    bos_id: int,
    eos_id: int,
    on_batch: Callable[[int], None] | None = None,
) -> list[list[int]]:
    """Beam search over `sources` (token ids as the encoder saw them in training), batched by
    `decode.max_tokens` padded source tokens, longest first; results come back in input order.
    An empty source translates to an empty output."""
    check_lengths(model, [len(s) for s in sources], "source")
    device = next(model.parameters()).device
    order = sorted((i for i in range(len(sources)) if len(sources[i])), key=lambda i: -len(sources[i]))
    results: list[list[int]] = [[] for _ in sources]
    start = 0
    while start < len(order):
        width = len(sources[order[start]])  # the longest of this batch, since sorted
        size = max(1, decode.max_tokens // max(width, 1))
        chunk = order[start : start + size]
        src = source_tensor([sources[i] for i in chunk], model.pad_id).to(device)
        hyps = beam_search(
            model, src, bos_id=bos_id, eos_id=eos_id, beam=decode.beam, alpha=decode.alpha,
            max_len_b=decode.max_len_b, length_penalty=decode.length_penalty,
        )
        for i, hyp in zip(chunk, hyps):
            results[i] = hyp
        if on_batch is not None:
            on_batch(len(chunk))
        start += size
    return results

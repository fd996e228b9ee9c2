"""A decoder-only language model's continuation of prompts, by a decoding strategy (strategy.py):
greedy (a beam of 1), a beam search of decode.beam, or sampled with a temperature, top-k (Fan et
al. 2018), top-p (nucleus, Holtzman et al. 2020), epsilon filtering and a plugin's filters
(sampling.py). Each prompt draws from a generator of its own seeded with the seed, so that a
prompt's continuation depends on the prompt and the seed alone, not on the prompts beside it: the
same prompt and seed give the same text alone or in a batch, on the same device (on the CPU here;
a GPU's kernels may differ in their last bits, and a sample with them); a prompt given twice is
continued twice alike.

Each prompt is `<s>` then its tokens; generation reads it once (its keys and values cached in a
DecoderState) and adds one token a step until `</s>` or `max_new_tokens`, in the loop that every
search runs (loop.py: never `<pad>`, a NaN refused). `use_cache=False` is the reference: the whole
sequence again at every step; both give the same tokens."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from aiayn.blocks import TransformerModel
from aiayn.builder.decode.interrupt import decoding
from aiayn.builder.decode.strategy import Sampled, Strategy, Wanted
from aiayn.schemas.decode import DecodeSpec

__all__ = ["generate_ids"]


@torch.no_grad()
def generate_ids(
    model: TransformerModel,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    eos_id: int,
    strategy: Strategy | None = None,
    decode: DecodeSpec | None = None,
    seed: int | None = None,
    use_cache: bool = True,
) -> list[list[int]]:
    """The continuation of each prompt (token ids after its `<s>`; the model's source_bos_id is
    prepended), without `</s>`, in order, by `strategy` (None: sampling at temperature 1) under
    `decode` (a beam search's settings; None: the defaults). Prompts of one length go through in
    one batch; where the strategy draws, each prompt from its own generator seeded with `seed`
    (None: torch's default generator)."""
    if model.training:
        raise ValueError("generation needs model.eval(): dropout is active in training mode")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens ({max_new_tokens}) must be >= 1")
    strategy = Sampled() if strategy is None else strategy
    decode = DecodeSpec() if decode is None else decode
    device = next(model.parameters()).device
    bos = model.source_bos_id
    out: list[list[int]] = [[] for _ in prompts]
    by_length: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        by_length.setdefault(len(p), []).append(i)
    for _, rows in sorted(by_length.items()):
        ids = torch.tensor([[*([] if bos is None else [bos]), *prompts[i]] for i in rows], dtype=torch.long, device=device)
        room = model.output_room(ids[:, :-1])
        steps = max_new_tokens if room is None else min(max_new_tokens, int(room))  # the table's positions left
        if steps < 1:
            continue
        drawn = None if seed is None or not strategy.draws else [torch.Generator(device).manual_seed(seed) for _ in rows]
        wanted = Wanted(
            1, bos_id=eos_id if bos is None else bos, eos_id=eos_id, generator=drawn
        )  # bos: what each row starts with
        with decoding(rows):  # a watching caller (interrupt.py) may stop some of its prompts
            found = strategy.continuations(model, ids, steps, decode, wanted, use_cache=use_cache)
        for i, continuation in zip(rows, found):
            out[i] = continuation
    return out

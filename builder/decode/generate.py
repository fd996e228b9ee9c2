"""A decoder-only language model's continuation of prompts: greedy, or sampled with a temperature,
top-k (Fan et al. 2018), top-p (nucleus, Holtzman et al. 2020) and epsilon filtering (sampling.py). Each
prompt draws from a generator of its own seeded with the seed, so that a prompt's continuation
depends on the prompt and the seed alone, not on the prompts beside it: the same prompt and seed
give the same text alone or in a batch, on the same device (on the CPU here; a GPU's kernels may
differ in their last bits, and a sample with them); a prompt given twice is continued twice alike.

Each prompt is `<s>` then its tokens; generation reads it once (its keys and values cached in a
DecoderState) and adds one token a step until `</s>` or `max_new_tokens`. `use_cache=False` is
the reference: the whole sequence again at every step; both give the same tokens."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from aiayn.blocks import DecoderOnly
from aiayn.builder.decode.sampling import Sampling

__all__ = ["Sampling", "generate_ids"]


@torch.no_grad()
def generate_ids(
    model: DecoderOnly, prompts: Sequence[Sequence[int]], *, max_new_tokens: int, eos_id: int, sampling: Sampling = Sampling(),
    seed: int | None = None, use_cache: bool = True,
) -> list[list[int]]:  # fmt: skip
    """The continuation of each prompt (token ids after its `<s>`; the model's source_bos_id is
    prepended), without `</s>`, in order. Prompts of one length go through in one batch; each
    samples from its own generator seeded with `seed` (None: torch's default generator)."""
    if model.training:
        raise ValueError("generation needs model.eval(): dropout is active in training mode")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens ({max_new_tokens}) must be >= 1")
    device = next(model.parameters()).device
    bos = model.source_bos_id
    out: list[list[int]] = [[] for _ in prompts]
    by_length: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        by_length.setdefault(len(p), []).append(i)
    for _, rows in sorted(by_length.items()):
        ids = torch.tensor([[*([] if bos is None else [bos]), *prompts[i]] for i in rows], dtype=torch.long, device=device)
        generators = None if seed is None or sampling.greedy else [torch.Generator(device).manual_seed(seed) for _ in rows]
        for i, continuation in zip(rows, _continue(model, ids, max_new_tokens, eos_id, sampling, generators, use_cache)):
            out[i] = continuation
    return out


def _continue(
    model: DecoderOnly, ids: Tensor, max_new_tokens: int, eos_id: int, sampling: Sampling,
    generators: list[torch.Generator] | None, use_cache: bool,
) -> list[list[int]]:  # fmt: skip
    """Continuations of the rows of ids (B, L), equal-length prompts; `generators`: each row's."""
    room = model.output_room(ids[:, :-1])
    steps = max_new_tokens if room is None else min(max_new_tokens, int(room))  # the table's positions left
    state = model.init_state() if use_cache else None
    rows = torch.arange(ids.size(0), device=ids.device)  # each live row's index in the batch
    found: list[list[int]] = [[] for _ in range(ids.size(0))]
    prompt, tokens = ids[:, :-1], ids[:, -1:]  # the decoder reads the prompt as its memory, then the newest tokens
    for _ in range(max(steps, 0)):
        if state is None:
            logits = model.decode(tokens, prompt, None)[:, -1]
        else:
            logits = model.decode(tokens[:, -1:], prompt, None, state)[:, -1]
        nxt = sampling.choose(logits, None if generators is None else [generators[r] for r in rows.tolist()])  # (n,)
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
        done = nxt.eq(eos_id)
        for row, token, end in zip(rows.tolist(), nxt.tolist(), done.tolist()):
            if not end:
                found[row].append(token)
        if bool(done.all()):
            break
        if bool(done.any()):
            keep = (~done).nonzero().flatten()
            rows, tokens, prompt = rows[keep], tokens[keep], prompt[keep]
            if state is not None:
                state.reorder(keep)
    return found

"""A decoder-only language model's continuation of prompts: greedy, or sampled with a temperature,
top-k (Fan et al. 2018), top-p (nucleus, Holtzman et al. 2020) and epsilon filtering (sampling.py). Each
prompt draws from a generator of its own seeded with the seed, so that a prompt's continuation
depends on the prompt and the seed alone, not on the prompts beside it: the same prompt and seed
give the same text alone or in a batch, on the same device (on the CPU here; a GPU's kernels may
differ in their last bits, and a sample with them); a prompt given twice is continued twice alike.

Each prompt is `<s>` then its tokens; generation reads it once (its keys and values cached in a
DecoderState) and adds one token a step until `</s>` or `max_new_tokens`, in the loop that every
search runs (loop.py: never `<pad>`, a NaN refused): greedy is beam search with a beam of 1,
sampling the translation's sampler. `use_cache=False` is the reference: the whole sequence again
at every step; both give the same tokens."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from aiayn.blocks import TransformerModel
from aiayn.builder.decode.loop import Chooser, run_loop
from aiayn.builder.decode.sampling import Draws, Sampling
from aiayn.builder.decode.search import Beams

__all__ = ["Sampling", "generate_ids"]


@torch.no_grad()
def generate_ids(
    model: TransformerModel,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    eos_id: int,
    sampling: Sampling = Sampling(),
    seed: int | None = None,
    use_cache: bool = True,
) -> list[list[int]]:
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
    model: TransformerModel,
    ids: Tensor,
    max_new_tokens: int,
    eos_id: int,
    sampling: Sampling,
    generators: list[torch.Generator] | None,
    use_cache: bool,
) -> list[list[int]]:
    """Continuations of the rows of ids (B, L), equal-length prompts; `generators`: each row's."""
    B, device = ids.size(0), ids.device
    room = model.output_room(ids[:, :-1])
    steps = max_new_tokens if room is None else min(max_new_tokens, int(room))  # the table's positions left
    if steps < 1:
        return [[] for _ in range(B)]
    chooser: Chooser
    if sampling.greedy:
        chooser = beams = Beams(
            B, 1, eos_id=eos_id, alpha=0.0, length_penalty="gnmt", n_best=1, kept=1, early_stopping=True, device=device
        )
    else:
        chooser = draws = Draws(B, sampling=sampling, eos_id=eos_id, generator=generators, device=device)
    max_len = torch.full((B,), steps, dtype=torch.long, device=device)
    # the decoder reads the prompt as its memory, then the newest tokens from its last one
    run_loop(model, ids[:, :-1], None, ids[:, -1:], max_len, chooser, eos_id=eos_id, use_cache=use_cache)
    if sampling.greedy:
        return [hyps[0].ids for hyps in beams.best()]
    return [[] if h is None else h.ids for h in draws.found]

"""A decoder-only language model's continuation of prompts: greedy, or sampled with a temperature,
top-k (Fan et al. 2018) and top-p (nucleus, Holtzman et al. 2020) filtering, from a seeded
generator: the same seed gives the same text on the same device (on the CPU here; a GPU's kernels
may differ in their last bits, and a sample with them).

Each prompt is `<s>` then its tokens; generation reads it once (its keys and values cached in a
DecoderState) and adds one token a step until `</s>` or `max_new_tokens`. `use_cache=False` is
the reference: the whole sequence again at every step; both give the same tokens."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from aiayn.blocks import DecoderOnly


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen: `greedy` (the most probable), else drawn from the softmax of
    the logits / temperature, kept to the top_k most probable (0: all) and to the smallest set
    whose probability reaches top_p (1.0: all)."""

    greedy: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"temperature ({self.temperature}) must be > 0; for the most probable token take greedy")
        if self.top_k < 0:
            raise ValueError(f"top_k ({self.top_k}) must be >= 0 (0: no limit)")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p ({self.top_p}) must be in (0, 1]")

    def choose(self, logits: Tensor, generator: torch.Generator | None) -> Tensor:
        """(n,) next tokens from logits (n, V)."""
        if self.greedy:
            return logits.argmax(-1)
        return torch.multinomial(self.probabilities(logits), 1, generator=generator).squeeze(1)

    def probabilities(self, logits: Tensor) -> Tensor:
        """(n, V) the distribution a token is drawn from: tempered, top-k and top-p filtered, renormalised."""
        logits = logits.float() / self.temperature
        if self.top_k and self.top_k < logits.size(-1):
            kth = logits.topk(self.top_k, dim=-1).values[:, -1:]  # (n, 1)
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = logits.softmax(-1)
        if self.top_p < 1.0:
            sorted_probs, order = probs.sort(dim=-1, descending=True)
            before = sorted_probs.cumsum(-1) - sorted_probs  # the mass of the tokens ranked above each
            sorted_probs = sorted_probs.masked_fill(before >= self.top_p, 0.0)  # keep the smallest set reaching top_p
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        return probs / probs.sum(-1, keepdim=True)


@torch.no_grad()
def generate_ids(
    model: DecoderOnly, prompts: Sequence[Sequence[int]], *, max_new_tokens: int, eos_id: int, sampling: Sampling = Sampling(),
    generator: torch.Generator | None = None, use_cache: bool = True,
) -> list[list[int]]:  # fmt: skip
    """The continuation of each prompt (token ids after its `<s>`; the model's source_bos_id is
    prepended), without `</s>`, in order. Prompts of one length go through in one batch."""
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
        for i, continuation in zip(rows, _continue(model, ids, max_new_tokens, eos_id, sampling, generator, use_cache)):
            out[i] = continuation
    return out


def _continue(
    model: DecoderOnly, ids: Tensor, max_new_tokens: int, eos_id: int, sampling: Sampling, generator: torch.Generator | None,
    use_cache: bool,
) -> list[list[int]]:  # fmt: skip
    """Continuations of the rows of ids (B, L), equal-length prompts."""
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
        nxt = sampling.choose(logits, generator)  # (n,)
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

"""Greedy decoding for the tests: the searches' (beam search with a beam of 1), each result
checked against `greedy_reference`, the plainest greedy loop there is (one sentence at a time, the
whole prefix again at every step, no cache, no batch, no chooser) written here for the check."""

import torch
from torch import Tensor

from aiayn.blocks import TransformerModel
from aiayn.builder.decode.search import beam_search


def greedy(model: TransformerModel, src: Tensor, **settings: object) -> list[list[int]]:
    """beam_search(beam=1) of src (B, S), asserted equal to greedy_reference; its result."""
    found = beam_search(model, src, beam=1, **settings)  # type: ignore[arg-type]
    reference = {k: v for k, v in settings.items() if k in ("bos_id", "eos_id", "max_len_b", "max_len_a")}
    assert found == greedy_reference(model, src, **reference)  # type: ignore[arg-type]
    return found


@torch.no_grad()
def greedy_reference(
    model: TransformerModel, src: Tensor, *, bos_id: int, eos_id: int, max_len_b: int = 50, max_len_a: float = 1.0
) -> list[list[int]]:
    """The most probable token but <pad> at every step, per row of src (B, S), until EOS or the
    limit: a * (the row's non-pad tokens) + b, within the positions a learned table leaves."""
    found = []
    for row in src.split(1):
        n = int(row.ne(model.pad_id).sum())
        limit = n + max_len_b if max_len_a == 1 else int(n * max_len_a) + max_len_b
        room = model.output_room(row)
        limit = limit if room is None else min(limit, int(room))
        memory, pad = model.encode(row)
        tokens = [bos_id]
        while len(tokens) - 1 < limit:
            logits = model.decode(torch.tensor([tokens], device=row.device), memory, pad)[0, -1]
            logits[model.pad_id] = -torch.inf
            nxt = int(logits.argmax())
            if nxt == eos_id:
                break
            tokens.append(nxt)
        found.append(tokens[1:])
    return found

"""Forced decoding: what a model says of given targets, and where its attention went.

`score_ids` runs the teacher-forced pass over (source, target) pairs and reads out, per pair,
the log-probability of each target token (EOS included where the target ends with it), their
sum, the length |Y| as the beam search counts it, and the score the beam search ranks by:
log P(Y | X) / lp(|Y|) under the decode settings' length penalty. Log-probabilities are read as
the search reads them (a log-softmax over the whole vocabulary in float32 or wider), so forced
scoring of the search's own output gives the search's score, up to the rounding of a full pass
against an incremental one (tests hold it to 1e-4).

Alignments (`alignment_layer`): for each target token, the source token that the decoder's
cross-attention in that layer weighs most when predicting it, the heads' weights averaged
(fairseq's `--print-alignment` takes the same argmax over a head average: single heads
specialise, some attend to punctuation or to the next word, and the average is what all of them
agree on). The default layer: the penultimate where the decoder has more than two layers (Garg
et al. 2019 found it the best aligned layer of a 6-layer Transformer; the last layer looks
ahead to what predicts the next word), the last in a decoder of one or two layers (the demo's
2-layer model: the last aligns 100 of 100 "she bought three books" sentences, the first 69).
EOS on either side is never aligned.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from aiayn.blocks import Sublayer, TransformerModel
from aiayn.builder.decode.interrupt import check, held
from aiayn.builder.decode.loop import TokenRules, output_limits
from aiayn.builder.decode.search import length_penalty
from aiayn.builder.decode.translate import batches, evaluating, padded, with_source_eos
from aiayn.builder.errors import UserError
from aiayn.schemas.decode import DecodeSpec


@dataclass(frozen=True)
class Scored:
    """One target under forced decoding. `token_log_probs`: one per target token, then EOS's
    where the target ends with EOS (natural log); `log_prob`: their sum; `length`: |Y| as the
    search counts it (tokens, EOS included where it ends with one); `score`: log_prob / lp(length),
    what the beam search ranks by; `alignment`: (source token, target token) index pairs, 0-based,
    in target order, where asked for."""

    token_log_probs: list[float]
    log_prob: float
    length: int
    score: float
    alignment: list[tuple[int, int]] | None = None


def score_ids(
    model: TransformerModel,
    sources: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    decode: DecodeSpec,
    *,
    bos_id: int,
    eos_id: int,
    ended: Sequence[bool] | None = None,
    alignment_layer: int | None = None,
    align: bool = False,
    on_batch: Callable[[int], None] | None = None,
    rules: TokenRules = TokenRules(),
) -> list[Scored]:
    """Forced decoding of each target (ids without BOS/EOS) given its source (ids without
    specials: the model's source_eos_id is appended where it has one), batched by
    `decode.max_tokens` padded tokens. `ended[i]` False: target i stopped at a length limit,
    without EOS (as a search's hypothesis can); by default every target ends with EOS. `align`:
    also the hard alignment from decoder layer `alignment_layer` (default: `default_alignment_layer`).
    `rules`: what the search does to each next token's distribution, done here alike."""
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources but {len(targets)} targets")
    ends = [True] * len(targets) if ended is None else list(ended)
    outputs = [[*t, eos_id] if e else list(t) for t, e in zip(targets, ends)]
    read = with_source_eos(model, sources)
    lengths = np.array([len(s) for s in read], dtype=np.int64)
    if (lengths == 0).any():
        raise UserError(f"source {int(np.flatnonzero(lengths == 0)[0]) + 1} is empty: there is nothing to condition on")
    out_lengths = np.array([len(o) for o in outputs], dtype=np.int64)
    order = np.argsort(-np.maximum(lengths, out_lengths), kind="stable")
    attention = cross_attention(model, alignment_layer) if align else None
    results: list[Scored | None] = [None] * len(sources)
    device = next(model.parameters()).device
    with evaluating(model):
        for chunk in batches(model, order, lengths, decode.max_tokens, out_lengths):
            check()  # a watching caller (interrupt.py) that wants none of it stops it here
            held()  # and the server's heavy lane waits here while its light lane has work
            rows = [outputs[i] for i in chunk]
            src = padded([read[i] for i in chunk], model.pad_id).to(device)
            tgt_in = padded([[bos_id, *o[:-1]] if o else [bos_id] for o in rows], model.pad_id).to(device)
            log_probs, weights = _forward(model, src, tgt_in, attention)
            log_probs = _ruled(log_probs, rules, model, src, decode, eos_id)
            for n, i in enumerate(chunk):
                alignment = None if weights is None else hard_alignment(weights[n], len(sources[i]), len(targets[i]))
                results[i] = _scored(log_probs[n], outputs[i], decode, alignment)
            if on_batch is not None:
                on_batch(len(chunk))
    return [r for r in results if r is not None]


def _scored(log_probs: Tensor, output: list[int], decode: DecodeSpec, alignment: list[tuple[int, int]] | None) -> Scored:
    """One row's score: the log-probabilities (T, V) of its output's tokens, their sum, and the sum
    over the length penalty as the search ranks it."""
    picked = log_probs[: len(output)].gather(1, torch.tensor(output, device=log_probs.device)[:, None])
    token_log_probs = picked.flatten().tolist()
    total = float(sum(token_log_probs))
    lp = float(length_penalty(len(output), decode.alpha, decode.length_penalty))
    return Scored(token_log_probs, total, len(output), total / lp if output else 0.0, alignment)


def _ruled(log_probs: Tensor, rules: TokenRules, model: TransformerModel, src: Tensor, decode: DecodeSpec, eos_id: int) -> Tensor:
    """log_probs (B, T, V) with the search's rules applied at every position (forced_eos: at a row's length limit)."""
    B, T, V = log_probs.shape
    limits = output_limits(model, src, decode.max_len_a, decode.max_len_b)  # (B,)
    at_limit = torch.arange(1, T + 1, device=log_probs.device)[None, :].eq(limits[:, None])  # (B, T): a row's last step
    return rules.apply(log_probs.view(B * T, V), model.pad_id, eos_id, at_limit.flatten()).view(B, T, V)


def _forward(model: TransformerModel, src: Tensor, tgt_in: Tensor, attention: Sublayer | None) -> tuple[Tensor, Tensor | None]:
    """log P (B, T, V) as the model gives them (TokenRules.apply does to them what the search
    does), and the head-averaged weights (B, T, S) of `attention` where given."""
    seen: list[Tensor] = []

    def hook(module: Sublayer, args: tuple[Any, ...], output: Any) -> None:
        seen.append(module.attention_weights(*args).float().mean(dim=1))

    handle = attention.register_forward_hook(hook) if attention is not None else None
    try:
        logits = model(src, tgt_in)
    finally:
        if handle is not None:
            handle.remove()
    log_probs = logits.to(torch.promote_types(logits.dtype, torch.float32)).log_softmax(dim=-1)
    return log_probs, (seen[0] if seen else None)


def alignment_layers(model: TransformerModel, name: str = "alignments") -> int:
    """How many decoder layers alignments can be read from, or a UserError saying why none
    (`name`: the argument that asked for them, as the caller names it)."""
    graph = model.graph()
    if graph is None:
        raise UserError(f"{name}: the members of an ensemble each attend their own way; align with one of its models")
    if not graph.cross_attention:
        raise UserError(f"{name}: they are read from cross-attention, which a decoder-only model has not")
    return len(graph.decoder.layers)


def cross_attention(model: TransformerModel, layer: int | None) -> Sublayer:
    """The cross-attention of decoder layer `layer` (default: `default_alignment_layer`)."""
    alignment_layers(model)
    graph = model.graph()
    assert graph is not None  # alignment_layers refuses an ensemble
    layers = graph.decoder.layers
    n = len(layers)
    index = default_alignment_layer(n) if layer is None else layer
    if not 0 <= index < n:
        raise UserError(f"alignment layer {layer}: the decoder has layers 0 to {n - 1}")
    for addnorm in layers[index].sublayers:  # type: ignore[union-attr]
        if addnorm.sublayer.reads_memory and getattr(addnorm.sublayer, "attention_maps", False):
            return addnorm.sublayer
    raise UserError(f"alignment layer {index}: that decoder layer has no cross-attention to read alignments from")


def default_alignment_layer(n_layers: int) -> int:
    """The penultimate of more than two decoder layers, else the last (see the module's text)."""
    return n_layers - 2 if n_layers > 2 else n_layers - 1


def hard_alignment(weights: Tensor, n_source: int, n_target: int) -> list[tuple[int, int]]:
    """(i, j) for each target token j < n_target: i the source token < n_source (so neither
    side's EOS, nor padding) with the highest weight (T, S) when predicting token j."""
    if n_source == 0 or n_target == 0:
        return []
    best = weights[:n_target, :n_source].argmax(dim=-1).tolist()
    return [(int(i), j) for j, i in enumerate(best)]


def word_alignment(
    pairs: Sequence[tuple[int, int]], source_words: Sequence[int], target_words: Sequence[int]
) -> list[tuple[int, int]]:
    """Token pairs as pairs of the words those tokens belong to (a word pair is aligned when
    any of their tokens are), sorted by target word, then source word."""
    return sorted({(source_words[i], target_words[j]) for i, j in pairs}, key=lambda p: (p[1], p[0]))


def pharaoh(pairs: Sequence[tuple[int, int]]) -> str:
    """Pharaoh format, as fast_align writes it: "i-j" pairs separated by spaces."""
    return " ".join(f"{i}-{j}" for i, j in pairs)

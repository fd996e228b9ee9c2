"""Greedy and beam search over an EncoderDecoder (Sec 6.1; length penalty and early stop from GNMT).

Both searches are batched over sentences of different lengths, drop sentences from the batch as
they finish (DecoderState.reorder keeps the cache in step), and return, per input sentence and
in input order, the token ids of the best hypothesis without BOS and EOS; `beam_hypotheses`
returns the n best as `Hypothesis` records, with the score each was ranked by.

Output length: at most `max_len_a * src_len + max_len_b` generated tokens per sentence, EOS
included (fairseq's --max-len-a/b; a = 1 by default), where src_len counts the non-pad tokens of
that sentence (Sec 6.1: "input length + 50"), and at most
the number of positions of a learned position table. A hypothesis that reaches the limit without
EOS ends there.

Beam search scores a finished hypothesis Y as log P(Y | X) / lp(Y), |Y| counting EOS, with
lp(Y) = ((5 + |Y|) / 6)^alpha (length_penalty="gnmt", Wu et al. 2016, eq. 14; the paper's) or
lp(Y) = |Y|^alpha (length_penalty="fairseq", fairseq's --lenpen). Each step expands every live
hypothesis, keeps the 2 * beam best candidates, finishes the EOS candidates among the top `beam`
of them (as fairseq does) and continues with the `beam` best non-EOS candidates. A sentence stops when
  - it has `beam` finished hypotheses (fairseq's rule; it makes beam=1 exactly greedy), or
  - no live hypothesis can still beat the n-th best finished one (GNMT's early termination, n
    the hypotheses asked for, 1 for a translation): a live hypothesis with log-probability s can
    at best score s / lp(max length), since log P only falls and lp only grows (alpha >= 0; true
    of both forms, as s <= 0). This only saves steps, it never changes the answer,
  - or it reached its maximum length.

`use_cache=False` is the reference decoder: it reruns the decoder over the whole prefix at every
step without a DecoderState; the search logic is shared, so both must return the same tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from aiayn.blocks import DecoderState, TransformerModel
from aiayn.builder.errors import UserError

Length = int | float | Tensor


@dataclass(frozen=True)
class Hypothesis:
    """A finished hypothesis of a beam search: its token ids without BOS and EOS; `score`, what
    the search ranked it by, log P(Y | X) / lp(|Y|); `log_prob`, log P(Y | X) (natural log);
    `ended`, whether it ended with EOS (counted in |Y| and in log P) rather than at the length
    limit."""

    ids: list[int]
    score: float
    log_prob: float
    ended: bool


@dataclass(frozen=True)
class TokenRules:
    """What the search does to the model's next-token log-probabilities besides never choosing
    <pad>: tokens it never chooses either (`suppress`: transformers' bad_words_ids of one token,
    suppress_tokens), whether the rest are renormalised to sum to 1 (transformers'
    renormalize_logits: the scores an n-best list prints change), and whether a hypothesis that
    reaches its length limit ends with EOS (transformers' forced_eos_token_id: at the last step
    EOS scores 0 and every other token -inf). The default is aiayn's own search."""

    suppress: tuple[int, ...] = ()
    renormalize: bool = False
    forced_eos: bool = False

    def apply(self, log_probs: Tensor, pad_id: int, eos_id: int, at_limit: Tensor | None) -> Tensor:
        """log_probs (n, V) of the rows' next tokens, the rules applied; `at_limit` (n,) bool: the
        rows whose next token is their last."""
        log_probs[:, pad_id] = -math.inf  # padding is never a word
        if self.suppress:
            log_probs[:, list(self.suppress)] = -math.inf
        if self.renormalize:
            log_probs = log_probs.log_softmax(dim=-1)
        if self.forced_eos and at_limit is not None and bool(at_limit.any()):
            forced = torch.full_like(log_probs, -math.inf)
            forced[:, eos_id] = 0.0
            log_probs = torch.where(at_limit[:, None], forced, log_probs)
        return log_probs


def gnmt_length_penalty(length: Length, alpha: float) -> float | Tensor:
    """GNMT's lp(Y) = ((5 + |Y|) / 6)^alpha."""
    return ((5 + length) / 6) ** alpha


def fairseq_length_penalty(length: Length, alpha: float) -> float | Tensor:
    """fairseq's lp(Y) = |Y|^alpha."""
    return length**alpha


LENGTH_PENALTIES = {"gnmt": gnmt_length_penalty, "fairseq": fairseq_length_penalty}


def length_penalty(length: Length, alpha: float, form: str = "gnmt") -> float | Tensor:
    """lp(Y) of the named form (see LENGTH_PENALTIES); the score is log P(Y | X) / lp(Y)."""
    return _penalty(form)(length, alpha)


def _penalty(form: str) -> Callable[[Length, float], float | Tensor]:
    if form not in LENGTH_PENALTIES:
        raise ValueError(f"length_penalty ({form!r}) must be one of {sorted(LENGTH_PENALTIES)}")
    return LENGTH_PENALTIES[form]


@torch.no_grad()
def greedy_search(
    model: TransformerModel,
    src: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    max_len_b: int = 50,
    max_len_a: float = 1.0,
    use_cache: bool = True,
    rules: TokenRules = TokenRules(),
) -> list[list[int]]:
    """The most probable next token at every step, per sentence of src (B, S)."""
    _check(model, src, bos_id=bos_id, eos_id=eos_id, max_len_b=max_len_b)
    memory, src_pad = model.encode(src)  # (B, S, d_model), (B, S)
    assert src_pad is not None  # encode without rows always makes the mask
    max_len = output_limits(model, src, max_len_a, max_len_b)  # (B,)
    sentence = torch.arange(src.size(0), device=src.device)  # input index of each batch row
    tokens = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
    state = model.init_state() if use_cache else None
    results: list[list[int]] = [[] for _ in range(src.size(0))]
    for step in range(1, int(max_len.max()) + 1):
        log_probs = _next_log_probs(model, tokens, memory, src_pad, state)
        next_token = rules.apply(log_probs, model.pad_id, eos_id, max_len.le(step)).argmax(-1)  # (n,)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)  # (n, step + 1)
        done = next_token.eq(eos_id) | max_len.le(step)
        if not done.any():
            continue
        for row in done.nonzero().flatten().tolist():
            results[int(sentence[row])] = _strip(tokens[row, 1:].tolist(), eos_id)
        keep = (~done).nonzero().flatten()
        if keep.numel() == 0:
            break
        tokens, memory, src_pad = tokens[keep], memory[keep], src_pad[keep]
        max_len, sentence = max_len[keep], sentence[keep]
        if state is not None:
            state.reorder(keep)
    return results


@dataclass
class _Beams:
    """The live sentences of a beam search, k hypotheses each; rows follow `sentence`."""

    k: int
    tokens: Tensor  # (n*k, t) each hypothesis so far, BOS first
    scores: Tensor  # (n, k) log P of each live hypothesis
    kept: Tensor  # (n, n_best) the scores of the n_best best finished hypotheses, best first
    n_finished: Tensor  # (n,)
    max_len: Tensor  # (n,) output limits
    sentence: Tensor  # (n,) input index of each live sentence
    memory: Tensor  # (n*k, S, d_model)
    src_pad: Tensor  # (n*k, S)
    state: DecoderState | None

    def keep(self, keep: Tensor, rows: Tensor, token: Tensor) -> None:
        """Continue the sentences `keep` (n',) with hypotheses `rows` (n'*k,) extended by `token`."""
        n, k = self.sentence.numel(), self.k
        self.tokens = torch.cat([self.tokens[rows], token[keep].view(-1, 1)], dim=1)
        if self.state is not None:  # beams of one sentence share its memory: select it only on drops
            self.state.reorder(rows, memory=False)
        if keep.numel() < n:
            kept_rows = (keep[:, None] * k + torch.arange(k, device=keep.device)).flatten()
            self.memory, self.src_pad = self.memory[kept_rows], self.src_pad[kept_rows]
            if self.state is not None:
                self.state.reorder_memory(kept_rows)
        self.scores, self.kept, self.n_finished = self.scores[keep], self.kept[keep], self.n_finished[keep]
        self.max_len, self.sentence = self.max_len[keep], self.sentence[keep]


def beam_search(model: TransformerModel, src: Tensor, **settings: Any) -> list[list[int]]:
    """Beam search with a length penalty and early termination, per sentence of src (B, S): the
    ids of the best hypothesis. `settings` are `beam_hypotheses`'s (bos_id, eos_id, beam, alpha,
    max_len_b, length_penalty, use_cache)."""
    return [hyps[0].ids for hyps in beam_hypotheses(model, src, **settings)]


@torch.no_grad()
def beam_hypotheses(
    model: TransformerModel,
    src: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    beam: int = 4,
    alpha: float = 0.6,
    max_len_b: int = 50,
    length_penalty: str = "gnmt",
    use_cache: bool = True,
    n_best: int = 1,
    max_len_a: float = 1.0,
    early_stopping: bool = True,
    rules: TokenRules = TokenRules(),
) -> list[list[Hypothesis]]:
    """The `n_best` (<= beam) best finished hypotheses of each sentence of src (B, S), best
    first: distinct token sequences; fewer only where the search finds fewer. `early_stopping`
    False: a sentence with `beam` finished hypotheses goes on while its best live one, scored
    at its current length, beats the worst of them (transformers' early_stopping=False)."""
    _check(model, src, bos_id=bos_id, eos_id=eos_id, max_len_b=max_len_b)
    _check_beam(beam, n_best, alpha)
    lp = _penalty(length_penalty)
    beams = _start(model, src, beam, n_best if early_stopping else max(n_best, beam), bos_id, (max_len_a, max_len_b), use_cache)
    found: list[list[Hypothesis]] = [[] for _ in range(src.size(0))]
    for step in range(1, int(beams.max_len.max()) + 1):
        n, k = beams.sentence.numel(), beams.k
        log_probs = _next_log_probs(model, beams.tokens, beams.memory, beams.src_pad, beams.state)  # (n*k, V)
        log_probs = rules.apply(log_probs, model.pad_id, eos_id, beams.max_len.le(step).repeat_interleave(k))
        V = log_probs.size(-1)
        candidates = (beams.scores.view(n * k, 1) + log_probs).view(n, k * V)
        top, index = candidates.topk(min(2 * k, k * V), dim=1)  # (n, 2k), best first
        origin = torch.arange(n, device=src.device)[:, None] * k + index // V  # (n, 2k) old batch row
        token = index % V
        is_eos = token.eq(eos_id)
        _finish(beams, found, top, origin, token, is_eos, step, lp(step, alpha))
        # live: the k best candidates that are not EOS, in score order
        rank = is_eos.long() * (2 * k) + torch.arange(top.size(1), device=src.device)
        live = rank.topk(k, dim=1, largest=False).indices  # (n, k)
        beams.scores, origin, token = top.gather(1, live), origin.gather(1, live), token.gather(1, live)
        unbeatable = beams.kept[:, n_best - 1] >= beams.scores[:, 0] / lp(beams.max_len.to(beams.scores.dtype), alpha)
        full = beams.n_finished.ge(k)
        if not early_stopping:  # full, and the best live hypothesis as it stands beats none of the k finished
            full &= beams.scores[:, 0] / lp(step, alpha) <= beams.kept[:, k - 1]
        done = beams.max_len.le(step) | full | unbeatable
        keep = (~done).nonzero().flatten()  # (n',) live sentences
        if keep.numel() == 0:
            break
        beams.keep(keep, origin[keep].flatten(), token)
    return [sorted(hyps, key=lambda h: -h.score)[:n_best] for hyps in found]


def _check_beam(beam: int, n_best: int, alpha: float) -> None:
    if beam < 1:
        raise ValueError(f"beam ({beam}) must be >= 1")
    if not 1 <= n_best <= beam:
        raise ValueError(f"n_best ({n_best}) must be between 1 and the beam size ({beam})")
    if alpha < 0:
        raise ValueError(f"alpha ({alpha}) must be >= 0: early termination relies on lp growing with length")


def _start(
    model: TransformerModel, src: Tensor, k: int, n_best: int, bos_id: int, limit: tuple[float, int], use_cache: bool
) -> _Beams:
    B, device = src.size(0), src.device
    memory, src_pad = model.encode(src)
    assert src_pad is not None  # encode without rows always makes the mask
    scores = torch.zeros(B, k, device=device)
    scores[:, 1:] = -math.inf  # the k start hypotheses are identical: expand only the first
    return _Beams(
        k=k,
        tokens=torch.full((B * k, 1), bos_id, dtype=torch.long, device=device),
        scores=scores,
        kept=torch.full((B, n_best), -math.inf, device=device),
        n_finished=torch.zeros(B, dtype=torch.long, device=device),
        max_len=output_limits(model, src, *limit),
        sentence=torch.arange(B, device=device),
        memory=memory.repeat_interleave(k, 0),  # (B*k, S, d_model)
        src_pad=src_pad.repeat_interleave(k, 0),
        state=model.init_state() if use_cache else None,
    )


def _finish(
    beams: _Beams, found: list[list[Hypothesis]], top: Tensor, origin: Tensor, token: Tensor, is_eos: Tensor,
    step: int, penalty: float | Tensor,
) -> None:  # fmt: skip
    """EOS within the top k finishes a hypothesis (at the length limit every top-k candidate
    does); those that enter a sentence's n best so far go to `found` (only this step's n best can)."""
    ends = (is_eos | beams.max_len.le(step)[:, None]) & top.isfinite()
    ends[:, beams.k :] = False
    final = (top / penalty).masked_fill(~ends, -math.inf)  # (n, 2k)
    n_best = beams.kept.size(1)
    values, cols = final.topk(min(n_best, final.size(1)), dim=1)  # (n, n_best)
    entering = (values > beams.kept[:, -1:]).nonzero().tolist()
    if entering:
        j = cols.tolist()
        score, log_prob, rows, tokens, eos = (t.tolist() for t in (values, top, origin, token, is_eos))
        sentence = beams.sentence.tolist()
        for row, i in entering:
            col = j[row][i]
            prefix = [*beams.tokens[rows[row][col], 1:].tolist(), tokens[row][col]]
            ended = eos[row][col]
            hypothesis = Hypothesis(prefix[:-1] if ended else prefix, score[row][i], log_prob[row][col], ended)
            found[sentence[row]].append(hypothesis)
    beams.kept = torch.cat([beams.kept, values], dim=1).topk(n_best, dim=1).values
    beams.n_finished += ends.sum(dim=1)


def _next_log_probs(
    model: TransformerModel,
    tokens: Tensor,
    memory: Tensor,
    memory_padding_mask: Tensor,
    state: DecoderState | None,
) -> Tensor:
    """log P(next token | prefix) (n, V) for each row of tokens (n, t), as the model gives them (TokenRules.apply
    masks <pad> and the rest)."""
    if state is None:
        logits = model.decode(tokens, memory, memory_padding_mask)[:, -1]  # whole prefix again
    else:
        logits = model.decode(tokens[:, -1:], memory, memory_padding_mask, state)[:, -1]
    log_probs = logits.to(torch.promote_types(logits.dtype, torch.float32)).log_softmax(dim=-1)
    if bool(log_probs.isnan().any()):  # NaN compares false with everything: no search could rank it
        raise UserError(
            "the model computes NaN for the next token's probabilities (its weights are not finite, or a setting makes "
            "attention or a norm divide by zero); it cannot be decoded"
        )
    return log_probs


def output_limits(model: TransformerModel, src: Tensor, max_len_a: float, max_len_b: int) -> Tensor:
    """(B,) output limits: max_len_a * src_len + max_len_b (fairseq's), within the target positions a learned table has."""
    lengths = src.ne(model.pad_id).sum(1)
    limit = lengths + max_len_b if max_len_a == 1 else (lengths * max_len_a).long() + max_len_b
    room = model.output_room(src)  # the positions a learned table has left (None: sinusoids never end)
    return limit if room is None else limit.clamp(max=room)


def _strip(ids: list[int], eos_id: int) -> list[int]:
    return ids[:-1] if ids and ids[-1] == eos_id else ids


def _check(model: TransformerModel, src: Tensor, *, bos_id: int, eos_id: int, max_len_b: int) -> None:
    if model.training:
        raise ValueError("search needs model.eval(): dropout is active in training mode")
    if src.dim() != 2:
        raise ValueError(f"src must be (batch, length) token ids, got shape {tuple(src.shape)}")
    if max_len_b < 0:
        raise ValueError(f"max_len_b ({max_len_b}) must be >= 0")
    for name, value in (("bos_id", bos_id), ("eos_id", eos_id)):
        if value == model.pad_id:
            raise ValueError(f"{name} ({value}) equals the model's pad_id: padding is masked, so it cannot be {name[:3]}")
    empty = src.ne(model.pad_id).sum(1).eq(0).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"src rows {empty} are empty (all padding); there is nothing to translate")

"""Beam search over either graph (Sec 6.1; length penalty and early stop from GNMT); with a beam
of 1, greedy decoding (the most probable token at every step).

The search is a chooser of the one decoding loop (loop.py): batched over sentences of different
lengths, it drops sentences from the batch as they finish and returns, per input sentence and in
input order, the token ids of the best hypothesis without BOS and EOS; `beam_hypotheses` returns
the n best as `Hypothesis` records, with the score each was ranked by.

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

from aiayn.blocks import TransformerModel
from aiayn.builder.decode.loop import Chooser, Next, Step, TokenRules, continue_prompts, decode_sources

Length = int | float | Tensor


@dataclass(frozen=True)
class Hypothesis:
    """A finished hypothesis of a search: its token ids without BOS and EOS; `score`, what the
    search ranked it by, log P(Y | X) / lp(|Y|); `log_prob`, log P(Y | X) (natural log); `ended`,
    whether it ended with EOS (counted in |Y| and in log P) rather than at the length limit."""

    ids: list[int]
    score: float
    log_prob: float
    ended: bool


def gnmt_length_penalty(length: Length, alpha: float) -> float | Tensor:
    """GNMT's lp(Y) = ((5 + |Y|) / 6)^alpha."""
    return ((5 + length) / 6) ** alpha


def fairseq_length_penalty(length: Length, alpha: float) -> float | Tensor:
    """fairseq's lp(Y) = |Y|^alpha."""
    return length**alpha


LENGTH_PENALTIES = {"gnmt": gnmt_length_penalty, "fairseq": fairseq_length_penalty}


def length_penalty(length: Length, alpha: float, form: str = "gnmt") -> float | Tensor:
    """lp(Y) of the named form (see LENGTH_PENALTIES); the score is log P(Y | X) / lp(Y)."""
    return penalty_of(form)(length, alpha)


def penalty_of(form: str) -> Callable[[Length, float], float | Tensor]:
    """The length penalty function of the named form."""
    if form not in LENGTH_PENALTIES:
        raise ValueError(f"length_penalty ({form!r}) must be one of {sorted(LENGTH_PENALTIES)}")
    return LENGTH_PENALTIES[form]


class Beams(Chooser):
    """Beam search as the loop's chooser: `n` sentences of `k` rows each (row i * k + j is
    sentence i's j-th hypothesis), their live scores, and the hypotheses they finished (`found`,
    per sentence in input order). `kept` is how many finished scores a sentence keeps to decide
    it is done (the n best asked, or the beam where early_stopping is off)."""

    def __init__(
        self,
        n: int,
        k: int,
        *,
        eos_id: int,
        alpha: float,
        length_penalty: str,
        n_best: int,
        kept: int,
        early_stopping: bool,
        device: torch.device,
    ) -> None:
        self.k, self.eos_id, self.alpha, self.lp = k, eos_id, alpha, penalty_of(length_penalty)
        self.n_best, self.early_stopping = n_best, early_stopping
        self.scores = torch.zeros(n, k, device=device)  # (n, k) log P of each live hypothesis
        self.scores[:, 1:] = -math.inf  # the k start hypotheses are identical: expand only the first
        self.kept = torch.full((n, kept), -math.inf, device=device)  # the best finished scores, best first
        self.n_finished = torch.zeros(n, dtype=torch.long, device=device)
        self.sentence = torch.arange(n, device=device)  # input index of each live sentence
        self.found: list[list[Hypothesis]] = [[] for _ in range(n)]

    def choose(self, at: Step) -> Next:
        """Expand every live hypothesis, keep the 2k best candidates, finish the EOS ones among
        the top k, go on with the k best others (the module's text)."""
        log_probs, tokens, max_len, step = at.log_probs, at.tokens, at.max_len, at.index
        n, k, alpha = self.sentence.numel(), self.k, self.alpha
        max_len = max_len[::k]  # (n,) one limit a sentence
        V = log_probs.size(-1)
        candidates = (self.scores.view(n * k, 1) + log_probs).view(n, k * V)
        top, index = candidates.topk(min(2 * k, k * V), dim=1)  # (n, 2k), best first
        origin = torch.arange(n, device=top.device)[:, None] * k + index // V  # (n, 2k) old batch row
        token = index % V
        is_eos = token.eq(self.eos_id)
        self._finish(tokens, top, origin, token, is_eos, max_len.le(step), self.lp(step, alpha))
        # live: the k best candidates that are not EOS, in score order
        rank = is_eos.long() * (2 * k) + torch.arange(top.size(1), device=top.device)
        live = rank.topk(k, dim=1, largest=False).indices  # (n, k)
        self.scores, origin, token = top.gather(1, live), origin.gather(1, live), token.gather(1, live)
        unbeatable = self.kept[:, self.n_best - 1] >= self.scores[:, 0] / self.lp(max_len.to(self.scores.dtype), alpha)
        full = self.n_finished.ge(k)
        if not self.early_stopping:  # full, and the best live hypothesis as it stands beats none of the k finished
            full &= self.scores[:, 0] / self.lp(step, alpha) <= self.kept[:, k - 1]
        done = max_len.le(step) | full | unbeatable
        keep = (~done).nonzero().flatten()  # (n',) live sentences
        self.scores, self.kept, self.n_finished = self.scores[keep], self.kept[keep], self.n_finished[keep]
        self.sentence = self.sentence[keep]
        # beams of one sentence share its memory: select it only where sentences were dropped
        memory_rows = None if keep.numel() == n else (keep[:, None] * k + torch.arange(k, device=keep.device)).flatten()
        return Next(token[keep].flatten(), origin[keep].flatten(), memory_rows)

    def _finish(
        self,
        tokens: Tensor,
        top: Tensor,
        origin: Tensor,
        token: Tensor,
        is_eos: Tensor,
        at_limit: Tensor,
        penalty: float | Tensor,
    ) -> None:
        """EOS within the top k finishes a hypothesis (at the length limit every top-k candidate
        does); those that enter a sentence's best so far go to `found` (only this step's best can)."""
        ends = (is_eos | at_limit[:, None]) & top.isfinite()
        ends[:, self.k :] = False
        final = (top / penalty).masked_fill(~ends, -math.inf)  # (n, 2k)
        kept = self.kept.size(1)
        values, cols = final.topk(min(kept, final.size(1)), dim=1)  # (n, kept)
        entering = (values > self.kept[:, -1:]).nonzero().tolist()
        if entering:
            j = cols.tolist()
            score, log_prob, rows, chosen, eos = (t.tolist() for t in (values, top, origin, token, is_eos))
            sentence = self.sentence.tolist()
            for row, i in entering:
                col = j[row][i]
                prefix = [*tokens[rows[row][col], 1:].tolist(), chosen[row][col]]
                ended = eos[row][col]
                hypothesis = Hypothesis(prefix[:-1] if ended else prefix, score[row][i], log_prob[row][col], ended)
                self.found[sentence[row]].append(hypothesis)
        self.kept = torch.cat([self.kept, values], dim=1).topk(kept, dim=1).values
        self.n_finished += ends.sum(dim=1)

    def best(self) -> list[list[Hypothesis]]:
        """Each sentence's n best finished hypotheses, best first."""
        return [sorted(hyps, key=lambda h: -h.score)[: self.n_best] for hyps in self.found]


def beam_search(model: TransformerModel, src: Tensor, **settings: Any) -> list[list[int]]:
    """Beam search with a length penalty and early termination, per sentence of src (B, S): the
    ids of the best hypothesis (beam=1: the most probable token at every step). `settings` are
    `beam_hypotheses`'s (bos_id, eos_id, beam, alpha, max_len_b, length_penalty, use_cache, ...)."""
    return [hyps[0].ids for hyps in beam_hypotheses(model, src, **settings)]


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
    check_beam(beam, n_best, alpha)
    beams = Beams(
        src.size(0),
        beam,
        eos_id=eos_id,
        alpha=alpha,
        length_penalty=length_penalty,
        n_best=n_best,
        kept=n_best if early_stopping else max(n_best, beam),
        early_stopping=early_stopping,
        device=src.device,
    )
    decode_sources(
        model,
        src,
        beams,
        copies=beam,
        bos_id=bos_id,
        eos_id=eos_id,
        max_len_a=max_len_a,
        max_len_b=max_len_b,
        rules=rules,
        use_cache=use_cache,
    )
    return beams.best()


def beam_continuations(
    model: TransformerModel,
    prompts: Tensor,
    *,
    steps: int,
    eos_id: int,
    beam: int = 1,
    alpha: float = 0.0,
    length_penalty: str = "gnmt",
    early_stopping: bool = True,
    rules: TokenRules = TokenRules(),
    use_cache: bool = True,
) -> list[list[int]]:
    """The best continuation a beam of `beam` finds after each prompt of prompts (B, L), without
    </s> (beam=1, alpha 0: the most probable token at every step)."""
    check_beam(beam, 1, alpha)
    beams = Beams(
        prompts.size(0),
        beam,
        eos_id=eos_id,
        alpha=alpha,
        length_penalty=length_penalty,
        n_best=1,
        kept=1 if early_stopping else beam,
        early_stopping=early_stopping,
        device=prompts.device,
    )
    continue_prompts(model, prompts, beams, copies=beam, steps=steps, eos_id=eos_id, rules=rules, use_cache=use_cache)
    return [hyps[0].ids for hyps in beams.best()]


def check_beam(beam: int, n_best: int, alpha: float) -> None:
    """A beam of 1 or more, 1 <= n_best <= beam, alpha >= 0."""
    if beam < 1:
        raise ValueError(f"beam ({beam}) must be >= 1")
    if not 1 <= n_best <= beam:
        raise ValueError(f"n_best ({n_best}) must be between 1 and the beam size ({beam})")
    if alpha < 0:
        raise ValueError(f"alpha ({alpha}) must be >= 0: early termination relies on lp growing with length")

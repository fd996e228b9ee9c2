"""The one incremental decoding loop: beam search (search.py), sampling (sampling.py) and a
language model's generation (generate.py) are each a `Chooser` handed to `run_loop`, and so are,
through them, ensembles and MBR's candidates.

The loop owns what every search shares: the live rows (each an output so far, its start token
first; the memory it reads; its length limit), the DecoderState that caches them, the model's
next-token log-probabilities (refused when NaN), and the token rules (`TokenRules`: never `<pad>`,
suppressed tokens, renormalisation, EOS forced at the limit). A chooser adds how the next tokens
are chosen: it reads a step's log-probabilities and says which rows go on, extended by which
token; it keeps what finished. Greedy decoding is beam search with a beam of 1 (fairseq's rule
makes it exactly the most probable token at every step).

`use_cache=False` is the reference decoder: the whole prefix again at every step, without a
DecoderState; both must choose the same tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from aiayn.blocks import DecoderState, TransformerModel
from aiayn.builder.decode.interrupt import held, step_tokens, stopped_sources, streams, watched
from aiayn.builder.errors import UserError


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


@dataclass(frozen=True)
class Next:
    """What a chooser decided at one step: `token` (n',), the token each row that goes on adds;
    `rows` (n',), the row each of them extends (a row may go on twice, or not at all; None: every
    row, in order); `memory_rows` (n',), the memory row each reads from now on (None: the memory
    stays as it is, right where rows moved only among copies of one source)."""

    token: Tensor
    rows: Tensor | None = None
    memory_rows: Tensor | None = None


@dataclass(frozen=True)
class Step:
    """What a chooser reads at one step: the rules' log-probabilities (n, V) of each row's next
    token, the rows' outputs so far (n, step), their length limits (n,), the step (from 1), and,
    for a chooser that `wants_hidden`, the decoder's output at each row's newest position
    (n, d_model: what the output projection turns into the logits; None for the others)."""

    log_probs: Tensor
    tokens: Tensor
    max_len: Tensor
    index: int
    hidden: Tensor | None = None


class Chooser(Protocol):
    """How a search chooses the next tokens (see the module's text). `wants_hidden`: the loop hands
    it the decoder's hidden states too (Step.hidden), of one model (an ensemble has no one state)."""

    wants_hidden: bool = False

    def choose(self, step: Step) -> Next:
        """The rows that go on after `step.index`."""
        ...


@torch.no_grad()
def run_loop(
    model: TransformerModel,
    memory: Tensor,
    memory_padding_mask: Tensor | None,
    tokens: Tensor,
    max_len: Tensor,
    chooser: Chooser,
    *,
    eos_id: int,
    rules: TokenRules = TokenRules(),
    use_cache: bool = True,
    copies: int = 1,
) -> None:
    """Decode from rows `tokens` (n, t0) reading `memory` (n, ...) until every row finished or
    reached its limit `max_len` (n,) of generated tokens; the chooser keeps what it found. Rows
    b * copies to b * copies + copies - 1 decode the loop's source b: where a caller watches
    (interrupt.py), a stopped source's rows end at the step it was stopped."""
    state = model.init_state() if use_cache else None
    hidden = bool(chooser.wants_hidden)
    origin = torch.arange(tokens.size(0), device=tokens.device) // copies if watched() else None  # (n,) each row's source
    streamed = streams()  # one row a source: its tokens are its output's, handed on as chosen
    if streamed and copies > 1:
        raise UserError(
            f"stream: this decoding keeps {copies} rows a source until it ends (a beam of {copies}, or {copies} samples), "
            "so there is no one output to stream: ask for one (beam 1, greedy, or one sample)"
        )
    for step in range(1, int(max_len.max()) + 1 if max_len.numel() else 1):
        if origin is not None:
            held()  # the server's heavy lane waits here while its light lane has work
            max_len = _stopped_end(origin, max_len, step)
        log_probs, states = next_log_probs(model, tokens, memory, memory_padding_mask, state, hidden=hidden)
        log_probs = rules.apply(log_probs, model.pad_id, eos_id, max_len.le(step))
        chosen = chooser.choose(Step(log_probs, tokens, max_len, step, states))
        rows, memory_rows = chosen.rows, chosen.memory_rows
        if rows is not None:
            if rows.numel() == 0:
                break
            tokens, max_len = tokens[rows], max_len[rows]
            origin = None if origin is None else origin[rows]
            if state is not None:
                state.reorder(rows, memory=False)
        if memory_rows is not None:
            memory = memory[memory_rows]
            memory_padding_mask = None if memory_padding_mask is None else memory_padding_mask[memory_rows]
            if state is not None:
                state.reorder_memory(memory_rows)
        tokens = torch.cat([tokens, chosen.token[:, None]], dim=1)
        if streamed and origin is not None:  # after the reorder: each new row's source
            step_tokens(origin.tolist(), chosen.token.tolist())


def _stopped_end(origin: Tensor, max_len: Tensor, step: int) -> Tensor:
    """max_len (n,) with the rows of the sources a caller stopped limited to `step`: they end now."""
    stopped = stopped_sources()
    if stopped is None:
        return max_len
    ends = torch.isin(origin, torch.tensor(stopped, device=origin.device))
    return torch.where(ends, max_len.clamp(max=step), max_len)


def next_log_probs(
    model: TransformerModel,
    tokens: Tensor,
    memory: Tensor,
    memory_padding_mask: Tensor | None,
    state: DecoderState | None,
    *,
    hidden: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """log P(next token | prefix) (n, V) for each row of tokens (n, t), as the model gives them
    (TokenRules.apply masks <pad> and the rest), and where `hidden` the decoder's output (n, d_model)
    the logits are projected from (else None)."""
    new = tokens if state is None else tokens[:, -1:]  # the whole prefix again, or the newest token
    states = None
    if hidden:
        graph = model.graph()
        if graph is None:
            raise UserError("this search reads the decoder's hidden states, and an ensemble has one a member: decode one model")
        states = model.decode(new, memory, memory_padding_mask, state, project=False)[:, -1]  # type: ignore[call-arg]
        logits = graph.generator(states)
    else:
        logits = model.decode(new, memory, memory_padding_mask, state)[:, -1]
    log_probs = logits.to(torch.promote_types(logits.dtype, torch.float32)).log_softmax(dim=-1)
    if bool(log_probs.isnan().any()):  # NaN compares false with everything: no search could rank it
        raise UserError(
            "the model computes NaN for the next token's probabilities (its weights are not finite, or a setting makes "
            "attention or a norm divide by zero); it cannot be decoded"
        )
    return log_probs, states


@torch.no_grad()
def decode_sources(
    model: TransformerModel,
    src: Tensor,
    chooser: Chooser,
    *,
    copies: int,
    bos_id: int,
    eos_id: int,
    max_len_a: float,
    max_len_b: int,
    rules: TokenRules,
    use_cache: bool,
) -> None:
    """The loop over sources src (B, S): each encoded once and read by `copies` rows (a beam's
    hypotheses, a source's samples; row b * copies + j is source b's j-th), each row started with
    `bos_id` and limited by `output_limits`."""
    check_sources(model, src, bos_id=bos_id, eos_id=eos_id, max_len_b=max_len_b)
    memory, src_pad = model.encode(src)  # (B, S, d_model), (B, S)
    tokens = torch.full((src.size(0) * copies, 1), bos_id, dtype=torch.long, device=src.device)
    max_len = output_limits(model, src, max_len_a, max_len_b).repeat_interleave(copies)
    memory = memory.repeat_interleave(copies, 0)
    src_pad = None if src_pad is None else src_pad.repeat_interleave(copies, 0)
    run_loop(model, memory, src_pad, tokens, max_len, chooser, eos_id=eos_id, rules=rules, use_cache=use_cache, copies=copies)


@torch.no_grad()
def continue_prompts(
    model: TransformerModel,
    prompts: Tensor,
    chooser: Chooser,
    *,
    copies: int,
    steps: int,
    eos_id: int,
    rules: TokenRules = TokenRules(),
    use_cache: bool = True,
) -> None:
    """The loop over prompts (B, L) of one length (a decoder-only model's `<s>` and tokens): each read
    as the memory but for its last token, which its `copies` rows start from (row b * copies + j is
    prompt b's j-th), each adding at most `steps` tokens."""
    rows = prompts if copies == 1 else prompts.repeat_interleave(copies, 0)
    max_len = torch.full((rows.size(0),), steps, dtype=torch.long, device=prompts.device)
    run_loop(
        model, rows[:, :-1], None, rows[:, -1:], max_len, chooser, eos_id=eos_id, rules=rules, use_cache=use_cache, copies=copies
    )


def output_limits(model: TransformerModel, src: Tensor, max_len_a: float, max_len_b: int) -> Tensor:
    """(B,) output limits: max_len_a * src_len + max_len_b (fairseq's), within the target positions a learned table has."""
    lengths = src.ne(model.pad_id).sum(1)
    limit = lengths + max_len_b if max_len_a == 1 else (lengths * max_len_a).long() + max_len_b
    room = model.output_room(src)  # the positions a learned table has left (None: sinusoids never end)
    return limit if room is None else limit.clamp(max=room)


def strip_eos(ids: list[int], eos_id: int) -> list[int]:
    """`ids` without a final EOS."""
    return ids[:-1] if ids and ids[-1] == eos_id else ids


def check_sources(model: TransformerModel, src: Tensor, *, bos_id: int, eos_id: int, max_len_b: int) -> None:
    """What a search of src (B, S) needs: an eval-mode model, token ids in two dimensions, no
    empty row, and BOS and EOS that are not padding."""
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

"""Text in, text out: the one path from sentences to translations.

Validation BLEU during training, results.json, `aiayn translate` and `aiayn evaluate` all call
`translate_texts`, as fairseq validates with the generator `fairseq-generate` uses: encode with
the source tokenizer, batch by tokens (longest first), beam-search, decode with the target
tokenizer, return in input order. A blank line translates to an empty line.
"""

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import torch

from aiayn.blocks import TransformerModel
from aiayn.builder.data.sampler import pack
from aiayn.builder.data.tokenizer import Tokenizer
from aiayn.builder.decode.interrupt import decoding
from aiayn.builder.decode.loop import TokenRules
from aiayn.builder.decode.search import Hypothesis
from aiayn.builder.decode.strategy import BeamSearch, Strategy, Wanted
from aiayn.builder.errors import UserError
from aiayn.schemas.decode import DecodeSpec


def translate_texts(
    model: TransformerModel,
    src_tokenizer: Tokenizer,
    tgt_tokenizer: Tokenizer,
    lines: Sequence[str],
    decode: DecodeSpec,
    *,
    on_batch: Callable[[int], None] | None = None,
    what: str = "source",
) -> list[str]:
    """Detokenized translations of `lines`, in order; `what` names the lines in messages."""
    ids = encode_sources(model, src_tokenizer, lines, decode, what)
    out = translate_ids(
        model,
        ids,
        decode,
        bos_id=output_start(model, tgt_tokenizer),
        eos_id=tgt_tokenizer.eos_id,
        on_batch=on_batch,
        rules=token_rules(decode, tgt_tokenizer),
    )
    return tgt_tokenizer.decode_batch(out)


def token_rules(decode: DecodeSpec, tgt_tokenizer: Tokenizer) -> TokenRules:
    """What the decode section does to the next token's distribution, its `suppress` pieces as
    ids of the target vocabulary (a piece it does not have is a UserError)."""
    ids = {token: i for i, token in enumerate(tgt_tokenizer.tokens())}
    missing = [piece for piece in decode.suppress if piece not in ids]
    if missing:
        raise UserError(
            f"decode.suppress: {missing[0]!r} is not a token of the target vocabulary; give its pieces as the tokenizer writes them"
        )
    return TokenRules(
        suppress=tuple(ids[p] for p in decode.suppress), renormalize=decode.renormalize, forced_eos=decode.forced_eos
    )


def encode_sources(
    model: TransformerModel, tokenizer: Tokenizer, lines: Sequence[str], decode: DecodeSpec, what: str
) -> list[list[int]]:
    """The token ids of each line (a blank line: none), each checked against the input limits."""
    ids = tokenizer.encode_batch([line if line.strip() else "" for line in lines])
    check_lengths(model, [len(x) for x in ids], what, limit=decode.max_input_len, source=True)
    return ids


def check_lengths(
    model: TransformerModel, lengths: Sequence[int], what: str, *, limit: int | None = None, source: bool = False
) -> None:
    """Name the first line longer than `limit` tokens (decode.max_input_len), or than a learned
    position table has rows (a `source` line's with the </s> the model's sources end with, in
    the source's table; a target's, EOS or BOS counted by the caller, in the target's)."""
    too_long = next(((i, n) for i, n in enumerate(lengths) if limit is not None and n > limit), None)
    if too_long is not None:
        raise UserError(
            f"{what} line {too_long[0] + 1} has {too_long[1]} tokens, more than decode.max_input_len ({limit}); "
            "split that line, or raise the limit (max_input_len)",
            setting="max_input_len",
        )
    positions = model.source_positions() if source else model.target_positions()  # None: sinusoids never end
    if positions is None:
        return
    extra = model.source_extra if source else 0
    for i, n in enumerate(lengths):
        n += extra
        if n > positions:
            raise UserError(
                f"{what} line {i + 1} has {n} tokens but the model's learned positions cover only "
                f"{positions}; shorten or split that line"
            )


def with_source_eos(model: TransformerModel, sources: Sequence[Sequence[int]]) -> Sequence[Sequence[int]]:
    """`sources` as the model reads them: each non-empty one followed by the model's
    source_eos_id (model.source_eos), if it has one; a decoder-only model's after its <s>."""
    eos, bos = model.source_eos_id, model.source_bos_id
    if bos is not None:
        sources = [[bos, *s] if len(s) else s for s in sources]
    return sources if eos is None else [[*s, eos] if len(s) else s for s in sources]


def output_start(model: TransformerModel, tgt_tokenizer: Tokenizer) -> int:
    """The token the output follows: <s> for an encoder-decoder's decoder, <sep> after a
    decoder-only model's `<s> x` (a UserError where its vocabulary has none)."""
    first = model.first_output_id(tgt_tokenizer.bos_id, tgt_tokenizer.sep_id)
    if first is None:
        raise UserError("this decoder-only model translates <s> source <sep> target, and its tokenizer has no <sep>")
    return first


def batches(
    model: TransformerModel, order: np.ndarray, lengths: np.ndarray, max_tokens: int, out_lengths: np.ndarray | None = None
) -> Sequence[list[int]]:
    """`pack`'s batches; for a model whose prompts must be of one length (a decoder-only model's), each cut where the length changes."""
    packed = pack(order, lengths, lengths if out_lengths is None else out_lengths, max_tokens)
    if not model.equal_length_prompts:
        return packed
    return [
        [int(i) for i in group]
        for chunk in packed
        for group in np.split(np.asarray(chunk), np.flatnonzero(np.diff(lengths[chunk])) + 1)
    ]


def padded(rows: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
    """(len(rows), longest) token ids, right-padded."""
    width = max(len(r) for r in rows)
    return torch.tensor([list(r) + [pad_id] * (width - len(r)) for r in rows], dtype=torch.long)


@contextmanager
def evaluating(model: torch.nn.Module) -> Iterator[None]:
    """Eval mode (no dropout) and no gradients inside; the model's mode restored after."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def translate_ids(
    model: TransformerModel,
    sources: Sequence[Sequence[int]],
    decode: DecodeSpec,
    *,
    bos_id: int,
    eos_id: int,
    on_batch: Callable[[int], None] | None = None,
    rules: TokenRules = TokenRules(),
) -> list[list[int]]:
    """Beam search over `sources` (token ids, no specials: the model's source_eos_id is appended
    where it has one), batched by `decode.max_tokens` padded source tokens, longest first; results
    come back in input order. An empty source translates to an empty output."""
    found = translate_hypotheses(model, sources, decode, bos_id=bos_id, eos_id=eos_id, on_batch=on_batch, rules=rules)
    return [hyps[0].ids for hyps in found]


def translate_hypotheses(
    model: TransformerModel,
    sources: Sequence[Sequence[int]],
    decode: DecodeSpec,
    *,
    bos_id: int,
    eos_id: int,
    n_best: int = 1,
    on_batch: Callable[[int], None] | None = None,
    rules: TokenRules = TokenRules(),
    strategy: Strategy = BeamSearch(),
    seed: int = 1,
) -> list[list[Hypothesis]]:
    """`translate_ids` with the `n_best` best hypotheses of each source and their scores, best
    first, as `strategy` finds them (strategy.py: the beam search, or samples drawn from a
    generator seeded with `seed`). An empty source is not decoded: one empty hypothesis, score 0."""
    device = next(model.parameters()).device
    generator = torch.Generator(device).manual_seed(seed) if strategy.draws else None
    wanted = Wanted(n=n_best, bos_id=bos_id, eos_id=eos_id, rules=rules, generator=generator)
    sources = with_source_eos(model, sources)
    lengths = np.array([len(s) for s in sources], dtype=np.int64)
    order = np.flatnonzero(lengths)[np.argsort(-lengths[lengths > 0], kind="stable")]
    results: list[list[Hypothesis]] = [[Hypothesis([], 0.0, 0.0, ended=False)] for _ in sources]
    with evaluating(model):
        for chunk in batches(model, order, lengths, decode.max_tokens):
            src = padded([sources[i] for i in chunk], model.pad_id).to(device)
            with decoding(chunk):  # a watching caller (interrupt.py) may stop some of its sources
                found = strategy.hypotheses(model, src, decode, wanted)
            for i, hyps in zip(chunk, found):
                results[i] = hyps
            if on_batch is not None:
                on_batch(len(chunk))
    return results

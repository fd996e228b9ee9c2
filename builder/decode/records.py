"""What `Translator.translate(..., with_scores=True)` and `Translator.score` return: one record
per target, its numbers in natural log (fairseq prints base 2), its alignment in words; and what
`LanguageModel.score` returns, one `LineScore` a line."""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from aiayn.builder.data.tokenizer import Tokenizer
from aiayn.builder.decode.forced import Scored, pharaoh, word_alignment
from aiayn.builder.decode.search import Hypothesis


@dataclass(frozen=True)
class Score:
    """A target as the model scores it.

    `ids`, `tokens`: its token ids and pieces (no BOS, no EOS); `score`: what the beam search
    ranks it by, log P(Y | X) / lp(|Y|) under the decode settings' length penalty; `log_prob`:
    log P(Y | X); `length`: |Y|, EOS counted where the target ends with it; `token_log_probs`:
    one per token, then EOS's; `alignment`: (source word, target word) pairs, 0-based, the words
    of the source as the model read it and of the target, split on whitespace (`pharaoh()`
    writes them as "i-j" pairs); `token_alignment`: the same in tokens. Alignments only where
    asked for.

    :param ids: its token ids (no BOS, no EOS)
    :param tokens: its pieces
    :param score: what the beam search ranks it by, log P(Y | X) / lp(|Y|)
    :param log_prob: log P(Y | X), natural log
    :param length: |Y|, EOS counted where the target ends with it
    :param token_log_probs: one per token, then EOS's
    :param alignment: (source word, target word) pairs, 0-based, where asked for
    :param token_alignment: the same in tokens"""

    ids: list[int]
    tokens: list[str]
    score: float
    log_prob: float
    length: int
    token_log_probs: list[float]
    alignment: list[tuple[int, int]] | None = None
    token_alignment: list[tuple[int, int]] | None = None

    def pharaoh(self) -> str:
        """The word alignment in Pharaoh format ("0-0 1-2 ..."); empty where none was asked for."""
        return pharaoh(self.alignment or [])


@dataclass(frozen=True)
class Translation(Score):
    """One of a source's n best translations: a `Score` (`score` and `log_prob` as the search
    computed them) with its `text`, as `aiayn translate` writes it. An empty (blank) source is not
    decoded: its one translation is empty, with score 0. `utility`: where minimum-Bayes-risk
    decoding chose it, its expected utility against the pseudo-references. Its other fields are
    a Score's (ids, tokens, score, log_prob, length, token_log_probs, alignment, token_alignment).

    :param text: the translation as `aiayn translate` writes it
    :param utility: its expected utility, where MBR chose it"""

    text: str = ""
    utility: float | None = None


@dataclass(frozen=True)
class LineScore:
    """A line of text as a language model scores it: `<s>` then its tokens, each predicted, then
    `</s>` (as `aiayn evaluate` counts a sentence).

    :param text: the line
    :param ids: its token ids (no <s>, no </s>)
    :param tokens: its pieces
    :param log_prob: log P(line), natural log, </s> included
    :param length: the tokens predicted, </s> counted
    :param n_bytes: its UTF-8 bytes and a newline, what bits per byte divides by
    :param token_log_probs: one per token, then </s>'s"""

    text: str
    ids: list[int]
    tokens: list[str]
    log_prob: float
    length: int
    n_bytes: int
    token_log_probs: list[float]

    @property
    def bpb(self) -> float:
        """Bits per byte: -log2 P(line) over its bytes (a newline counted, as evaluate counts it)."""
        return -self.log_prob / math.log(2) / self.n_bytes


def line_record(text: str, ids: Sequence[int], token_log_probs: Sequence[float], tokenizer: Tokenizer) -> LineScore:
    """The LineScore of a line from its token log-probabilities."""
    tokens = [tokenizer.id_to_token(i) for i in ids]
    n_bytes = len(text.encode("utf-8")) + 1
    return LineScore(text, list(ids), tokens, float(sum(token_log_probs)), len(token_log_probs), n_bytes, list(token_log_probs))


def scored_record(ids: Sequence[int], scored: Scored, tgt_tokenizer: Tokenizer, source_words: Sequence[int] | None) -> Score:
    """A Score of target `ids` from its forced decoding (word alignment where `source_words`,
    the word of each source token, is given)."""
    tokens = [tgt_tokenizer.id_to_token(i) for i in ids]
    words = None
    if scored.alignment is not None and source_words is not None:
        words = word_alignment(scored.alignment, source_words, tgt_tokenizer.word_index(ids))
    return Score(list(ids), tokens, scored.score, scored.log_prob, scored.length, scored.token_log_probs, words, scored.alignment)


def translation_record(
    hypothesis: Hypothesis, text: str, base: Score | None, *, align: bool, utility: float | None = None
) -> Translation:
    """A Translation of a search's hypothesis: its score and log P as the search ranked it,
    the rest from its forced decoding (`base`); None: a blank source's empty translation."""
    if base is None:
        empty: list[tuple[int, int]] | None = [] if align else None
        return Translation([], [], hypothesis.score, hypothesis.log_prob, 0, [], empty, empty, text, utility)
    return Translation(
        base.ids,
        base.tokens,
        hypothesis.score,
        hypothesis.log_prob,
        base.length,
        base.token_log_probs,
        base.alignment,
        base.token_alignment,
        text,
        utility,
    )

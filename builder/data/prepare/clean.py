"""The cleaning of training pairs that the anchors apply: Moses' clean-corpus-n.perl as fairseq's
prepare-wmt14en2de.sh calls it (`-ratio 1.5 ... 1 250`).

A pair is dropped, in clean-corpus-n's order, when a side is empty (after collapsing whitespace),
either side has more than `max_len` tokens, fewer than `min_len`, or the longer side has more than
`ratio` times the tokens of the shorter. What is counted as a token is a choice:

  moses       Moses tokens, as sacremoses' tokenizer.perl port with -a (aggressive hyphen splits)
              makes them: the words fairseq's script tokenizes before it learns BPE
  whitespace  whitespace-separated words of the raw text (fast; fewer tokens than Moses')

fairseq counts the BPE pieces of the Moses tokens, which our pipeline does not have before the
tokenizer is trained; the experiment's `data.max_len` bounds the BPE length at training time.
The kept lines are written as they were read: counting never changes the text.
"""

import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Literal

# why a pair is dropped -> how the report says it
REASONS = {"empty": "empty", "too_long": "too long", "too_short": "too short", "ratio": "over the length ratio"}


@dataclass(frozen=True)
class CleanRules:
    """clean-corpus-n's settings; fairseq's prepare-wmt14en2de.sh uses these defaults."""

    min_len: int = 1
    max_len: int = 250
    ratio: float = 1.5
    count: Literal["moses", "whitespace"] = "moses"

    def describe(self, script: str = "fairseq's prepare-wmt14en2de.sh") -> str:
        return (
            f"{self.min_len}-{self.max_len} {self.count} tokens a side, length ratio <= {self.ratio:g}, "
            f"as Moses' clean-corpus-n in {script}"
        )


class Cleaner:
    """`reason(src, tgt)`: why clean-corpus-n drops the pair, or None when it keeps it."""

    def __init__(self, rules: CleanRules, src_lang: str, tgt_lang: str) -> None:
        self.rules = rules
        self._count_src = token_counter(rules.count, src_lang)
        self._count_tgt = token_counter(rules.count, tgt_lang)

    def reason(self, src: str, tgt: str) -> str | None:
        if not src.split() or not tgt.split():
            return "empty"
        n_src, n_tgt = self._count_src(src), self._count_tgt(tgt)
        if n_src > self.rules.max_len or n_tgt > self.rules.max_len:
            return "too_long"
        if n_src < self.rules.min_len or n_tgt < self.rules.min_len:
            return "too_short"
        if n_src > self.rules.ratio * n_tgt or n_tgt > self.rules.ratio * n_src:
            return "ratio"
        return None


def token_counter(count: str, lang: str) -> Callable[[str], int]:
    """str -> its number of tokens, as `count` names them (see the module's docstring)."""
    if count == "whitespace":
        return lambda text: len(text.split())
    from sacremoses import MosesTokenizer

    tokenizer = MosesTokenizer(lang=lang)
    return lambda text: len(tokenizer.tokenize(text, aggressive_dash_splits=True, escape=False))


def judge(
    pairs: Iterable[tuple[str, str]], rules: CleanRules, langs: tuple[str, str], *, workers: int = 1, chunk: int = 2000
) -> Iterator[tuple[str, str, str | None]]:
    """Each pair with `Cleaner.reason`, in input order. Moses' tokenizer takes a few thousand
    sentences a second on a core (benchmarks/prepare.py), so with workers > 1 chunks of pairs
    are judged in that many processes, at most 4 chunks a process in flight: the corpus streams
    through, never whole in memory."""
    if workers <= 1 or rules.count == "whitespace":  # splitting on whitespace is faster than a pipe
        cleaner = Cleaner(rules, *langs)
        for src, tgt in pairs:
            yield src, tgt, cleaner.reason(src, tgt)
        return
    with multiprocessing.Pool(workers, initializer=_start_worker, initargs=(rules, langs)) as pool:
        pending: deque = deque()
        for batch in batched(pairs, chunk):
            pending.append((batch, pool.apply_async(_judge_batch, (batch,))))
            if len(pending) >= 4 * workers:
                yield from _judged(*pending.popleft())
        while pending:
            yield from _judged(*pending.popleft())


def _judged(batch, result) -> Iterator[tuple[str, str, str | None]]:
    for (src, tgt), reason in zip(batch, result.get()):
        yield src, tgt, reason


_worker_cleaner: Cleaner | None = None  # one per worker process, made by its initializer


def _start_worker(rules: CleanRules, langs: tuple[str, str]) -> None:
    global _worker_cleaner
    _worker_cleaner = Cleaner(rules, *langs)


def _judge_batch(batch: list[tuple[str, str]]) -> list[str | None]:
    assert _worker_cleaner is not None  # made by the worker's initializer
    return [_worker_cleaner.reason(src, tgt) for src, tgt in batch]


def batched(items: Iterable, n: int) -> Iterator[list]:
    it = iter(items)
    while batch := list(islice(it, n)):
        yield batch

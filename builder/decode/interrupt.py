"""Stopping a decoding between its steps, for a caller that waits on it (the server's deadlines, a
client that leaves): the caller watches a call with `watching(stopped, n)`, where `stopped()` gives
the indices of the call's n inputs (lines, pairs, prompts) whose outputs are no longer wanted.

The decoding asks between chunks and between steps. Where every input of the call is stopped it
raises `Interrupted`: nothing it would compute is wanted. Where some of a loop's sources are, their
rows end at that step (their length limit lowered to it, which every chooser honours: search.py,
sampling.py, a plugin's) and the others go on, to the tokens they find alone where no row's
choice reads another's: the search, and generation's generator per prompt (a sampled translation
draws for its whole batch from one generator, which the server never merges). With nothing
watched, which is every use but the server's, a check is one ContextVar read.

A watcher may also take each step's tokens as they are chosen (`on_tokens`: the server's streaming):
for a loop of one row a source (greedy, a sample a line, a continuation a prompt), the inputs whose
rows go on and the token each adds; a row's last token (its EOS, or the one at its limit) ends it
and is not handed on: the caller reads the output itself."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = [
    "Interrupted",
    "OnTokens",
    "check",
    "decoding",
    "held",
    "step_tokens",
    "stopped_sources",
    "streams",
    "watched",
    "watching",
]

OnTokens = Callable[[list[int], list[int]], None]  # (the call's inputs, the token each adds), one call a step


class Interrupted(Exception):
    """Every input of a watched call was stopped: its caller wants nothing it computes."""


@dataclass
class _Watch:
    stopped: Callable[[], Collection[int]]
    n: int
    on_tokens: OnTokens | None = None
    hold: Callable[[], bool] | None = None
    sources: Sequence[int] | None = None  # the call's inputs that the running loop's sources are (None: all, in order)

    def now(self) -> set[int]:
        stopped = set(self.stopped())
        if len(stopped) >= self.n:
            raise Interrupted(f"all {self.n} inputs of the call were stopped")
        return stopped


_WATCHED: ContextVar[_Watch | None] = ContextVar("aiayn_decode_watch", default=None)


@contextmanager
def watching(
    stopped: Callable[[], Collection[int]], n: int, on_tokens: OnTokens | None = None, hold: Callable[[], bool] | None = None
) -> Iterator[None]:
    """Within it (in this thread), decoding asks `stopped()` which of the call's `n` inputs to stop.

    :param stopped: the indices (0 to n - 1) of the inputs whose outputs are no longer wanted
    :param n: how many inputs the call has
    :param on_tokens: called after each step of a loop of one row a source with the inputs whose rows go on and
        the token each adds (in the worker's thread: hand them on, do not decode there)
    :param hold: while it returns True the decoding waits between two steps (the server's heavy lane, while its light
        lane has work), its inputs still stopped as `stopped` says"""
    token = _WATCHED.set(_Watch(stopped, n, on_tokens, hold))
    try:
        yield
    finally:
        _WATCHED.reset(token)


@contextmanager
def decoding(sources: Sequence[int]) -> Iterator[None]:
    """Within it, the loop's sources are the call's inputs `sources` (a chunk's indices, in the loop's order);
    raises `Interrupted` first where every input of the call is stopped."""
    watch = _WATCHED.get()
    if watch is None:
        yield
        return
    watch.now()
    outer, watch.sources = watch.sources, list(sources)
    try:
        yield
    finally:
        watch.sources = outer


def watched() -> bool:
    """Whether a caller watches the decoding running in this thread."""
    return _WATCHED.get() is not None


def check() -> None:
    """Raises `Interrupted` where every input of the watched call is stopped (nothing watched: never)."""
    watch = _WATCHED.get()
    if watch is not None:
        watch.now()


def stopped_sources() -> list[int] | None:
    """The running loop's sources (their positions in it) that were stopped; None where nothing is watched or none is.
    Raises `Interrupted` where every input of the call is stopped."""
    watch = _WATCHED.get()
    if watch is None:
        return None
    stopped = watch.now()
    if not stopped:
        return None
    sources = watch.sources if watch.sources is not None else range(watch.n)
    found = [i for i, source in enumerate(sources) if source in stopped]
    return found or None


def step_tokens(origin: list[int], tokens: list[int]) -> None:
    """Hands a step's tokens to the watcher that takes them: `origin`, the loop position of the source each row
    that goes on decodes (one row a source), and the token it adds."""
    watch = _WATCHED.get()
    if watch is None or watch.on_tokens is None or not origin:
        return
    sources = watch.sources if watch.sources is not None else range(watch.n)
    watch.on_tokens([sources[i] for i in origin], tokens)


def streams() -> bool:
    """Whether a watcher takes each step's tokens."""
    watch = _WATCHED.get()
    return watch is not None and watch.on_tokens is not None


HOLD_POLL = 0.005  # seconds between looks at a hold


def held() -> None:
    """Waits while the watcher holds the decoding (between two steps), raising `Interrupted` where every input of the
    call is stopped meanwhile."""
    watch = _WATCHED.get()
    if watch is None or watch.hold is None:
        return
    while watch.hold():
        watch.now()
        time.sleep(HOLD_POLL)

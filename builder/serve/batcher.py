"""Dynamic batching, as Triton's dynamic batcher and LitServe do it: requests wait in a queue;
the worker takes the oldest, then gathers the others that decode with the same settings (the same
key) until the batch holds `max_batch_tokens` tokens or `max_queue_delay` seconds have passed since
it began waiting, and runs them as one call in a worker thread (one call at a time). While a call
runs, new requests queue, so a busy server batches more. There are two such lanes (Triton's
priority levels, by cost): a heavy request (the server says which) queues and decodes in a lane of
its own, beside the light ones, so that it never makes them wait for its whole length.

A request is never split; one larger than the budget runs alone. A request marked `alone` (its
output would depend on its batch) is never merged. Where a merged call fails, each of its requests
runs again alone, so that one bad request answers for itself only. A request whose client has gone
or whose deadline has passed (its future cancelled) is dropped from the queue before it costs
anything, and from a running call between its decoding steps: `run` is handed a `Call`, which says
which of the call's items belong to such requests (interrupt.py stops them)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

OnTokens = Callable[[list[int], list[int]], None]


@dataclass(eq=False)
class Job:
    """One request's share of a batch: its items (lines, pairs, prompts) and their cost in tokens;
    `on_tokens`, where the request streams (it runs alone), takes each step's tokens."""

    key: Hashable
    items: list[Any]
    tokens: int
    alone: bool
    future: asyncio.Future = field(repr=False)
    on_tokens: OnTokens | None = None


@dataclass(frozen=True)
class Call:
    """What a running call is handed besides its items: `stopped()`, the indices of the items whose
    request was cancelled since it began (read between decoding steps), and the streaming request's
    `on_tokens` (None: none streams), and `hold()`, while which it waits between two steps (the heavy
    lane's, while the light lane has work)."""

    stopped: Callable[[], list[int]]
    on_tokens: OnTokens | None = None
    hold: Callable[[], bool] | None = None


Run = Callable[[Hashable, list[Any], Call], Sequence[Any]]


@dataclass
class Counts:
    """What the batcher has done: requests answered, calls made, items decoded, requests dropped
    because their client left, requests that failed, merged calls that failed and ran each
    request alone."""

    requests: int = 0
    batches: int = 0
    items: int = 0
    cancelled: int = 0
    failed: int = 0
    split: int = 0


class Lane:
    """One queue and its worker (a thread of its own): Batcher's two lanes.

    :param run: as Batcher's
    :param counts: what the lanes have done, shared
    :param max_batch_tokens: the most tokens a merged batch holds
    :param max_queue_delay: seconds the oldest request waits for others to join it
    :param enabled: False: every request alone, one after another (batching off)
    :param setup: called once in the lane's thread before its first call (its torch threads)
    :param hold: handed to its calls: while it returns True they wait between two decoding steps"""

    def __init__(
        self,
        run: Run,
        counts: Counts,
        *,
        max_batch_tokens: int,
        max_queue_delay: float,
        enabled: bool = True,
        setup: Callable[[], None] | None = None,
        hold: Callable[[], bool] | None = None,
    ) -> None:
        self.run, self.max_batch_tokens, self.max_queue_delay, self.enabled = run, max_batch_tokens, max_queue_delay, enabled
        self.hold = hold
        self.pending: list[Job] = []
        self.counts = counts
        self.running = 0  # requests in the call now running
        self._arrived: asyncio.Event | None = None
        self._worker: asyncio.Task | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aiayn-decode", initializer=setup)

    async def submit(
        self, key: Hashable, items: list[Any], tokens: int, *, alone: bool = False, on_tokens: OnTokens | None = None
    ) -> list[Any]:
        """Queue a request and wait for its outputs (one an item); cancelling the wait drops it from the queue, or
        stops its call. A request with `on_tokens` (streamed) runs alone, handing it each step's tokens."""
        loop = asyncio.get_running_loop()
        if self._worker is None:
            self._arrived = asyncio.Event()
            self._worker = loop.create_task(self._work())
        job = Job(key, items, tokens, alone or not self.enabled or on_tokens is not None, loop.create_future(), on_tokens)
        self.pending.append(job)
        assert self._arrived is not None
        self._arrived.set()
        try:
            return await asyncio.shield(job.future)
        except asyncio.CancelledError:
            job.future.cancel()  # the client left: the worker drops it, or ignores its outputs
            raise

    async def close(self) -> None:
        """Stop the worker (after the requests in flight are answered: the server drains first)."""
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
        self._executor.shutdown(wait=True)

    async def _work(self) -> None:
        while True:
            batch = await self._gather()
            self.running = len(batch)
            try:
                await self._answer(batch)
            finally:
                self.running = 0

    async def _gather(self) -> list[Job]:
        """The next batch: the oldest live request and those that may join it."""
        assert self._arrived is not None
        loop = asyncio.get_running_loop()
        while True:
            self._drop_cancelled()
            if self.pending:
                break
            self._arrived.clear()
            await self._arrived.wait()
        first = self.pending[0]
        batch, tokens = [first], first.tokens
        deadline = loop.time() + self.max_queue_delay
        while not first.alone and tokens < self.max_batch_tokens:
            for job in self.pending[1:]:
                if job not in batch and not job.alone and job.key == first.key and not job.future.done():
                    if tokens + job.tokens <= self.max_batch_tokens:
                        batch.append(job)
                        tokens += job.tokens
            remaining = deadline - loop.time()
            if remaining <= 0 or tokens >= self.max_batch_tokens:
                break
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except asyncio.TimeoutError:
                pass
        self.pending = [job for job in self.pending if job not in batch]
        live = [job for job in batch if not job.future.done()]
        self.counts.cancelled += len(batch) - len(live)
        return live

    def _drop_cancelled(self) -> None:
        gone = [job for job in self.pending if job.future.done()]
        if gone:
            self.counts.cancelled += len(gone)
            self.pending = [job for job in self.pending if not job.future.done()]

    async def _answer(self, batch: list[Job]) -> None:
        """Run a batch and hand each request its outputs; a merged batch that fails runs each request alone."""
        if not batch:
            return
        loop = asyncio.get_running_loop()
        items = [item for job in batch for item in job.items]
        try:
            outputs = await loop.run_in_executor(self._executor, self.run, batch[0].key, items, _call(batch, self.hold))
        except Exception as e:  # noqa: BLE001 - handed to the request(s) that caused it
            if all(job.future.done() for job in batch):  # each was answered (cancelled) while it ran: stopped
                self.counts.cancelled += len(batch)
                return
            if len(batch) > 1:
                self.counts.split += 1
                for job in batch:
                    if not job.future.done():
                        await self._answer([job])
                return
            self._settle(batch[0], error=e)
            return
        self.counts.batches += 1
        self.counts.items += len(items)
        start = 0
        for job in batch:
            self._settle(job, outputs=list(outputs[start : start + len(job.items)]))
            start += len(job.items)

    def _settle(self, job: Job, *, outputs: list[Any] | None = None, error: Exception | None = None) -> None:
        if job.future.done():  # its client left while it ran
            self.counts.cancelled += 1
            return
        if error is not None:
            self.counts.failed += 1
            job.future.set_exception(error)
        else:
            self.counts.requests += 1
            job.future.set_result(outputs)


def _call(batch: list[Job], hold: Callable[[], bool] | None) -> Call:
    """What a call on `batch` asks between its steps: the indices of its items whose request's future is done
    (cancelled: the client left or the deadline passed), read from the worker thread; a lone stream's hook."""
    spans, start = [], 0
    for job in batch:
        spans.append((job, range(start, start + len(job.items))))
        start += len(job.items)

    def stopped() -> list[int]:
        return [i for job, span in spans if job.future.done() for i in span]

    return Call(stopped, batch[0].on_tokens if len(batch) == 1 else None, hold)


class Batcher:
    """The two lanes requests queue in: the light one, where most requests go, and the heavy one, for a
    request whose work would hold the others up (the server says which: builder/serve/memory.py). Each
    lane batches and decodes as the module says, one call at a time; the two decode side by side, the
    heavy lane's thread with fewer cores (`heavy_setup`), so that a heavy request delays a light one
    by the cores it shares, never by its whole length.

    :param run: called in a lane's thread with a key, the items of every request of a batch (in
        queue order) and the `Call` (which of them were cancelled since; a stream's token hook);
        returns one output an item
    :param max_batch_tokens: the most tokens a merged batch holds
    :param max_queue_delay: seconds the oldest request waits for others to join it
    :param enabled: False: every request alone, one after another in its lane (batching off)
    :param heavy_setup: called in the heavy lane's thread before its first call (e.g. torch.set_num_threads(1))"""

    def __init__(
        self,
        run: Run,
        *,
        max_batch_tokens: int,
        max_queue_delay: float,
        enabled: bool = True,
        heavy_setup: Callable[[], None] | None = None,
    ) -> None:
        self.counts = Counts()
        self.light = Lane(run, self.counts, max_batch_tokens=max_batch_tokens, max_queue_delay=max_queue_delay, enabled=enabled)
        self.heavy = Lane(
            run,
            self.counts,
            max_batch_tokens=max_batch_tokens,
            max_queue_delay=max_queue_delay,
            enabled=enabled,
            setup=heavy_setup,
            hold=self.light_busy,
        )

    def light_busy(self) -> bool:
        """Whether the light lane has a call running or requests waiting (read from the heavy lane's thread)."""
        return self.light.running > 0 or bool(self.light.pending)

    @property
    def lanes(self) -> dict[str, Lane]:
        """The lanes by name: light, heavy."""
        return {"light": self.light, "heavy": self.heavy}

    @property
    def pending(self) -> list[Job]:
        """The requests waiting, in both lanes."""
        return self.light.pending + self.heavy.pending

    @property
    def running(self) -> int:
        """The requests in the calls now running."""
        return self.light.running + self.heavy.running

    async def submit(
        self,
        key: Hashable,
        items: list[Any],
        tokens: int,
        *,
        alone: bool = False,
        on_tokens: OnTokens | None = None,
        heavy: bool = False,
    ) -> list[Any]:
        """A request's outputs (Lane.submit), decoded in the heavy lane where `heavy`."""
        lane = self.heavy if heavy else self.light
        return await lane.submit(key, items, tokens, alone=alone, on_tokens=on_tokens)

    async def close(self) -> None:
        """Stop both lanes (after the requests in flight are answered: the server drains first)."""
        await self.light.close()
        await self.heavy.close()

"""Streaming: a request that asks `"stream": true` is answered as server-sent events
(text/event-stream) while it decodes, as OpenAI's and TGI's streaming endpoints answer:

    data: {"index": 0, "text": "eine "}          one an output's new text, as its tokens come
    event: done
    data: {...}                                  the whole answer, as the request unstreamed gets it
    event: error
    data: {"error": ..., "request_id": ...}      in place of done where the request failed (504, 499, 400)

Each output's text is its tokens decoded so far, handed on but for a trailing space (which a
cleanup may take back at the next token) or an incomplete UTF-8 character (U+FFFD until its last
byte comes), and its remainder once it ends: the pieces of output i joined are the `done` answer's
text i. Where a decoding changes text it already gave (no tokenizer here does), what was handed on
stands and `done` has the answer. A client that disconnects stops the decoding between two
steps (interrupt.py), as a deadline does."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from aiayn.builder.errors import UserError
from aiayn.builder.serve.batcher import OnTokens
from aiayn.builder.serve.errors import RequestError, error_body

Decode = Callable[[list[int]], str]


class TextStream:
    """One output's text as its tokens come.

    :param decode: its tokenizer's decoding of token ids
    :param start: the ids its text starts with (a prompt's, whose text a continuation's answer holds)"""

    def __init__(self, decode: Decode, start: Sequence[int] = ()) -> None:
        self.decode, self.ids, self.sent = decode, list(start), ""

    def add(self, token: int) -> str:
        """The text to hand on after `token` ("" where none is stable yet)."""
        self.ids.append(token)
        text = self.decode(self.ids)
        stable = text.rstrip(" \ufffd")  # a space the next token may take back ("a ." -> "a."), a byte not yet whole
        if not stable.startswith(self.sent) or len(stable) <= len(self.sent):
            return ""
        delta, self.sent = stable[len(self.sent) :], stable
        return delta

    def finish(self, text: str) -> str:
        """The rest of the output's final `text` (what the answer holds) after what was handed on."""
        delta = text[len(self.sent) :] if text.startswith(self.sent) else ""
        self.sent = text
        return delta


def event(data: Any, name: str | None = None) -> str:
    """One server-sent event: its name (None: a message) and its data as one line of JSON."""
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n"


async def stream_events(
    answered: Callable[[OnTokens], Awaitable[list[Any]]],
    streams: list[TextStream],
    texts_of: Callable[[list[Any]], list[str]],
    answer_of: Callable[[list[Any]], dict[str, Any]],
    request_id: str,
) -> AsyncIterator[str]:
    """The events of one streamed request; a failure before its first event is raised (the route answers it as
    any error, with its status), one after it is an `error` event.

    :param answered: queues the request with a token hook (called in the worker thread) and returns its outputs
    :param streams: one `TextStream` an output
    :param texts_of: each output's final text, from the outputs
    :param answer_of: the whole answer, from the outputs, as the request unstreamed gets it
    :param request_id: the request's id, for an error event"""
    steps: asyncio.Queue[tuple[list[int], list[int]]] = asyncio.Queue()
    task = asyncio.ensure_future(answered(_handed_to(steps)))
    began = False
    try:
        while not task.done() or not steps.empty():  # the steps the worker handed on before it returned, too
            if steps.empty():
                step = asyncio.ensure_future(steps.get())
                await asyncio.wait({task, step}, return_when=asyncio.FIRST_COMPLETED)
                if not step.done():
                    step.cancel()
                    continue
                inputs, tokens = step.result()
            else:
                inputs, tokens = steps.get_nowait()
            for piece in _pieces(streams, inputs, tokens):
                began = True
                yield piece
        try:
            found = task.result()
        except (RequestError, UserError) as e:
            if not began:
                raise
            yield event(error_body(e, request_id), "error")
            return
        for index, (stream, text) in enumerate(zip(streams, texts_of(found))):
            delta = stream.finish(text)
            if delta:
                yield event({"index": index, "text": delta})
        yield event(answer_of(found), "done")
    finally:
        if not task.done():
            task.cancel()  # the client left: its decoding stops between two steps


def _handed_to(steps: asyncio.Queue) -> OnTokens:
    """A token hook, called in the worker's thread, that puts each step on `steps` in the event loop's."""
    loop = asyncio.get_running_loop()

    def on_tokens(inputs: list[int], tokens: list[int]) -> None:
        loop.call_soon_threadsafe(steps.put_nowait, (inputs, tokens))

    return on_tokens


def _pieces(streams: list[TextStream], inputs: list[int], tokens: list[int]) -> list[str]:
    out = []
    for index, token in zip(inputs, tokens):
        delta = streams[index].add(token)
        if delta:
            out.append(event({"index": index, "text": delta}))
    return out

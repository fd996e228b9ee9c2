"""How `aiayn serve` reads a request's body before the app sees it: within a size and a time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiayn.builder.serve.errors import error_response


class BodyLimit:
    """ASGI middleware: a body over `limit` bytes is refused (413), unread where its Content-Length
    says so, else once that many bytes have come; a body that has not all come within `timeout`
    seconds is refused (408: a slow client holds no worker). The body is read here, then handed on.

    :param app: the application it wraps
    :param limit: bytes a body at most
    :param timeout: seconds the whole body may take to arrive"""

    def __init__(self, app: Any, limit: int, timeout: float) -> None:
        self.app, self.limit, self.timeout = app, limit, timeout

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            await self._refuse(
                413,
                f"the body has {int(length)} bytes, more than this server's max_request_bytes ({self.limit})",
                scope,
                receive,
                send,
            )
            return
        try:
            read = await asyncio.wait_for(self._read(receive), self.timeout)
        except asyncio.TimeoutError:
            message = f"the body did not all arrive within {self.timeout:g} s (aiayn serve --request-timeout-s)"
            await self._refuse(408, message, scope, receive, send)
            return
        if read is None:
            message = f"the body (sent without a Content-Length) is longer than this server's max_request_bytes ({self.limit})"
            await self._refuse(413, message, scope, receive, send)
            return
        replay = iter(read)

        async def replayed() -> Any:
            return next(replay, None) or await receive()

        await self.app(scope, replayed, send)

    async def _read(self, receive: Callable) -> list[dict] | None:
        """The body's messages, or None once more than `limit` bytes came."""
        read, total = [], 0
        while True:
            message = await receive()
            read.append(message)
            total += len(message.get("body", b""))
            if total > self.limit:
                return None
            if message["type"] != "http.request" or not message.get("more_body"):
                return read

    async def _refuse(self, status: int, message: str, scope: dict, receive: Callable, send: Callable) -> None:
        await error_response(status, message)(scope, receive, send)

"""What an operator reads of `aiayn serve`: a request id on every request (the client's
`X-Request-ID`, or one made here), echoed in the response's header, in every error body and in the
request's log line; and the server's metrics in Prometheus' text format at GET /metrics
(prometheus-client, in a registry of the app's own: nothing global).

Metrics: `aiayn_requests_total` (path, status), `aiayn_request_duration_seconds` (path: a
histogram), `aiayn_queue_depth` (requests waiting for the batcher), `aiayn_batch_items` (the items
of each call the batcher makes: a histogram), `aiayn_tokens_in_total` and `aiayn_tokens_out_total`
(model, endpoint: the tokens of the inputs queued and of the outputs answered)."""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Callable, MutableMapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

PATHS = ("/translate", "/score", "/generate", "/health", "/models", "/metrics", "/openapi.json", "/")
HEADER = b"x-request-id"
GIVEN = re.compile(r"[!-~]{1,128}")  # a client's id: 1 to 128 visible ASCII characters, else one is made
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
log = logging.getLogger("uvicorn.error")  # uvicorn's console: each request a line there (its access log is off)


class Metrics:
    """The server's metrics, in a registry of their own.

    :param queue_depth: what aiayn_queue_depth reads when scraped (the batcher's waiting requests)"""

    def __init__(self, queue_depth: Callable[[], int]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("aiayn_requests", "HTTP requests answered, by path and status", ["path", "status"], registry=r)
        self.latency = Histogram(
            "aiayn_request_duration_seconds", "Seconds from a request's arrival to its answer", ["path"], registry=r,
            buckets=LATENCY_BUCKETS,
        )  # fmt: skip
        self.queue = Gauge("aiayn_queue_depth", "Requests waiting for the batcher", registry=r)
        self.queue.set_function(queue_depth)
        self.batch = Histogram("aiayn_batch_items", "Items (lines, pairs, prompts) of each batched call", registry=r,
                               buckets=BATCH_BUCKETS)  # fmt: skip
        labels = ["model", "endpoint"]
        self.tokens_in = Counter("aiayn_tokens_in", "Tokens of the inputs queued", labels, registry=r)
        self.tokens_out = Counter("aiayn_tokens_out", "Tokens of the outputs answered", labels, registry=r)

    def text(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)


def request_id(scope: MutableMapping[str, Any]) -> str | None:
    """The id the middleware gave this request (None outside it)."""
    return scope.get("state", {}).get("request_id")


class RequestIds:
    """ASGI middleware: each HTTP request's id (its X-Request-ID where it gives a usable one, else a
    new one) in `scope["state"]`, in the response's X-Request-ID header, and in one log line when it
    is answered (method, path, status, milliseconds); each answer counted in `metrics`.

    :param app: the application it wraps
    :param metrics: where each answer is counted"""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(HEADER, b"").decode("latin-1")
        rid = given if GIVEN.fullmatch(given) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = rid
        start, status = time.perf_counter(), [500]

        held: list[dict] = []  # an error's start and body, until the body is whole: its JSON gets the id

        async def sent(message: dict) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != HEADER]
                message = {**message, "headers": [*headers, (HEADER, rid.encode("latin-1"))]}
                if status[0] >= 400 and (b"content-type", b"application/json") in headers:
                    held.append(message)
                    return
            elif held:
                held.append(message)
                if message.get("more_body"):
                    return
                start, *parts = held
                await _send_with_id(send, start, b"".join(m.get("body", b"") for m in parts), rid)
                return
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            seconds = time.perf_counter() - start
            path = scope["path"] if scope["path"] in PATHS else "other"
            self.metrics.requests.labels(path=path, status=str(status[0])).inc()
            self.metrics.latency.labels(path=path).observe(seconds)
            log.info("request %s: %s %s %d in %.1f ms", rid, scope["method"], scope["path"], status[0], 1000 * seconds)


async def _send_with_id(send: Callable, start: dict, body: bytes, rid: str) -> None:
    """An error answer with `request_id` in its JSON object (its Content-Length made to fit)."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        body = json.dumps({**data, "request_id": rid}).encode()
    headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
    await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})

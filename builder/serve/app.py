"""The ASGI application of `aiayn serve` (FastAPI on Starlette; uvicorn runs it): JSON endpoints
for translate, score and generate, each request queued in the dynamic batcher (batcher.py), at most
`max_queue` waiting (one more: 429); GET /health, GET /models, GET /metrics (operations.py), GET
/openapi.json and the page at /. Every answer carries its request's id (X-Request-ID).

Errors are JSON `{"error": message, "field": name}` (errors.py): 400 for a request the model or
the server's limits refuse, 413 for a body over `max_request_bytes` or more than `max_lines` lines,
422 for a body that does not match the schema, 404 for an unknown model. No request can stop the
server; a client that leaves before its answer drops its queued work."""

from __future__ import annotations

import asyncio
import difflib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any

import torch
from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, PlainTextResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST

from aiayn.builder.decode.interrupt import watching
from aiayn.builder.decode.language_model import LanguageModel
from aiayn.builder.errors import UserError
from aiayn.builder.serve.batcher import Batcher, Call, OnTokens
from aiayn.builder.serve.body import BodyLimit
from aiayn.builder.serve.errors import ERRORS, RequestError, add_error_handlers
from aiayn.builder.serve.memory import Estimate, estimate
from aiayn.builder.serve.messages import (
    GenerateRequest,
    GenerateResponse,
    ScoreRequest,
    ScoreResponse,
    TranslateRequest,
    TranslateResponse,
)
from aiayn.builder.serve.operations import Metrics, RequestIds, request_id
from aiayn.builder.serve.served import Served, run_generate, run_score, run_translate
from aiayn.builder.serve.streaming import TextStream, stream_events

DISCONNECT_POLL = 0.05  # seconds between checks that a waiting client is still there
PER_REQUEST = {"timeout_s", "stream"}
# what an endpoint that streams documents besides its errors: its 200 as server-sent events too (streaming.py)
STREAMS: dict[int | str, dict[str, Any]] = {
    **ERRORS, 200: {"content": {"text/event-stream": {}}, "description": "the answer, or with stream: true its events"},
}  # fmt: skip  # a request's fields that are not the model's options (and do not split batches)


@dataclass(frozen=True)
class Terms:
    """What the server holds a request to besides its options: its deadline (`timeout_s`; None: the server's), and
    whether it is heavy (it queues and decodes in the batcher's heavy lane)."""

    timeout_s: float | None = None
    heavy: bool = False


@dataclass(frozen=True)
class Limits:
    """What one request may ask and how requests are batched.

    :param max_lines: lines (pairs, prompts) a request at most
    :param max_request_bytes: a request body's bytes at most
    :param max_batch_tokens: tokens a merged batch holds at most (Triton's preferred batch, in tokens)
    :param max_queue_delay_ms: how long the oldest request waits for others to join it (Triton's
        max_queue_delay_microseconds, LitServe's batch_timeout), in milliseconds
    :param batching: False: each request alone, in turn
    :param max_beam: the widest beam a request may ask for
    :param max_n_best: the most candidates (n-best, samples, MBR's references) a line
    :param max_new_tokens: the most tokens an output may have (a translation's max_len_b, a continuation's)
    :param max_input_len: the most tokens an input line may have
    :param max_queue: requests waiting for the batcher at most; one more is answered 429 with Retry-After
    :param request_timeout_s: seconds from a request's arrival to its answer at most (a request may ask for less,
        `timeout_s`): past them it is answered 504 and its decoding stopped between steps
    :param max_batch_memory_gb: GiB a request's largest decoding batch may hold at most (serve/memory.py's upper
        bound from the model's dims); a request above it is refused before it decodes
    :param heavy_request_gb: a request whose lines would hold more than this many GiB decoded all at once (its
        work, by the same estimate) decodes in the batcher's heavy lane, beside the others
    :param heavy_threads: the torch threads of the heavy lane's calls (the light lane keeps the process's)
    :param cors_origins: the origins a browser may call the server from (CORS; none by default)"""

    max_lines: int = 256
    max_request_bytes: int = 1 << 20
    max_batch_tokens: int = 4096
    max_queue_delay_ms: float = 5.0
    batching: bool = True
    max_beam: int = 16
    max_n_best: int = 16
    max_new_tokens: int = 256
    max_input_len: int = 1024
    max_queue: int = 256
    request_timeout_s: float = 60.0
    max_batch_memory_gb: float = 4.0
    heavy_request_gb: float = 0.25
    heavy_threads: int = 1
    cors_origins: tuple[str, ...] = ()

    def exceeded(self, body: Any) -> tuple[str, str] | None:
        """(the field, the message) of the first setting of a request above this server's limit, or None: a request
        may ask for less than the server allows, never more."""
        for field, limit, flag in (
            ("beam", self.max_beam, "--max-beam"),
            ("n_best", self.max_n_best, "--max-n-best"),
            ("mbr_references", self.max_n_best, "--max-n-best"),
            ("max_len_b", self.max_new_tokens, "--max-new-tokens"),
            ("max_new_tokens", self.max_new_tokens, "--max-new-tokens"),
            ("max_input_len", self.max_input_len, "--max-input-len"),
            ("max_tokens", self.max_batch_tokens, "--max-batch-tokens"),
            ("timeout_s", self.request_timeout_s, "--request-timeout-s"),
        ):
            value = getattr(body, field, None)
            if value is not None and value > limit:
                return field, f"{field}: {value} is more than this server allows ({limit}; aiayn serve {flag})"
        return None


class Service:
    """The models, their batcher and the limits: what every route asks.

    :param served: the models (the first: the default)
    :param limits: request limits and batching settings"""

    def __init__(self, served: Sequence[Served], limits: Limits) -> None:
        self.served, self.limits = list(served), limits
        self.models = {s.name: s for s in served}
        for one in served:
            check_own_settings(one, limits)
        self.metrics = Metrics(lambda: len(self.batcher.pending))
        self.batcher = Batcher(
            self.run,
            max_batch_tokens=limits.max_batch_tokens,
            max_queue_delay=limits.max_queue_delay_ms / 1000,
            enabled=limits.batching,
            heavy_setup=lambda: torch.set_num_threads(limits.heavy_threads),
        )

    def run(self, key: Hashable, items: list[Any], call: Call) -> list[Any]:
        """A batch's call, in the worker thread: the endpoint's, on the model the key names, stopping the items
        whose requests were cancelled (the client left, the deadline passed) between decoding steps."""
        assert isinstance(key, tuple)
        name, endpoint, options = key
        self.metrics.batch.observe(len(items))
        with watching(call.stopped, len(items), call.on_tokens, call.hold):
            return CALLS[endpoint](self.models[name], items, json.loads(options))

    def pick(self, name: str | None, endpoint: str) -> Served:
        """The model a request names (None: the first), checked to answer `endpoint`."""
        one = self.served[0] if name is None else self.models.get(name)
        if one is None:
            close = difflib.get_close_matches(name or "", self.models, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            listed = ", ".join(self.models)
            raise RequestError(404, f"model: no model named {name!r}{hint} (GET /models lists them: {listed})", "model")
        if endpoint not in one.info()["endpoints"]:
            raise RequestError(400, f"model: {one.name!r} is {one.model.kind}: POST {one.model.endpoints[0]}", "model")
        return one

    def check_limits(self, body: Any, one: Served) -> Terms:
        """A request's settings within the server's limits, and its output no longer than the model's own allows;
        returns its terms: its deadline, and whether it is heavy (its work above --heavy-request-gb)."""
        over = self.limits.exceeded(body)
        if over is not None:
            raise RequestError(400, over[1], over[0])
        a, run = getattr(body, "max_len_a", None), one.model.spec.decode.max_len_a
        if a is not None and a > run:
            raise RequestError(
                400, f"max_len_a: {a} is more than the model's decode.max_len_a ({run}); a request may lower it only", "max_len_a"
            )
        found = estimate(one, body)
        self.check_memory(found)
        return Terms(body.timeout_s, found.work > self.limits.heavy_request_gb * 2**30)

    def check_memory(self, found: Estimate) -> None:
        """A decoding request whose largest batch would hold more than --max-batch-memory-gb, refused before it decodes."""
        most = self.limits.max_batch_memory_gb
        if found.batch is not None and found.batch > most * 2**30:
            raise RequestError(
                400,
                f"this request needs up to {found.batch / 2**30:.2f} GiB to decode one batch ({found.rows:,} rows of "
                f"{found.positions:,} positions: sources x beam or candidates, the longest line and its output), more than this "
                f"server's {most:g} GiB (aiayn serve --max-batch-memory-gb): send shorter lines, ask for a smaller beam or "
                "fewer candidates, fewer new tokens, or a lower max_tokens",
            )

    def check_lines(self, items: Sequence[Any], field: str) -> None:
        if len(items) > self.limits.max_lines:
            raise RequestError(
                413,
                f"{field}: {len(items)} lines, more than this server's max_lines ({self.limits.max_lines}); split the request",
                field,
            )

    async def queue(
        self,
        request: Request,
        one: Served,
        endpoint: str,
        items: list[Any],
        texts: list[str],
        options: dict,
        alone: bool = False,
        terms: Terms = Terms(),
        on_tokens: OnTokens | None = None,
    ) -> list[Any]:
        """The request's items through the batcher; a client that leaves, or its deadline (its terms' timeout_s, at
        most the server's), takes its request out of the queue, or stops its decoding between steps; a heavy request
        queues in the batcher's heavy lane. `on_tokens`: the request streams (alone), handed each step's tokens."""
        self._check_room()
        timeout_s = terms.timeout_s
        timeout = self.limits.request_timeout_s if timeout_s is None else timeout_s
        deadline = asyncio.get_running_loop().time() + timeout
        key = (one.name, endpoint, json.dumps(options, sort_keys=True))
        tokens = one.tokens(texts)
        self.metrics.tokens_in.labels(model=one.name, endpoint=endpoint).inc(tokens)
        task = asyncio.ensure_future(self.batcher.submit(key, items, tokens, alone=alone, on_tokens=on_tokens, heavy=terms.heavy))
        try:
            return await self._answered(task, request, one, endpoint, deadline, timeout_s)
        finally:
            task.cancel()  # a no-op where it is answered; else its client left, its deadline passed, or its caller went

    async def _answered(
        self, task: asyncio.Future, request: Request, one: Served, endpoint: str, deadline: float, timeout_s: float | None
    ) -> list[Any]:
        """The outputs of a request's queued `task`, or a 499 once its client left, a 504 past its deadline."""
        while True:
            left = deadline - asyncio.get_running_loop().time()
            done, _ = await asyncio.wait({task}, timeout=max(0.0, min(DISCONNECT_POLL, left)))
            if done:
                found = task.result()
                self.metrics.tokens_out.labels(model=one.name, endpoint=endpoint).inc(
                    one.tokens(_outputs(endpoint, found), output=True)
                )
                return found
            if await request.is_disconnected():
                raise RequestError(499, "the client closed the connection")
            if left <= 0:  # cancelled (finally above): out of the queue, or stopped between its decoding steps
                raise self.past_deadline(timeout_s)

    def _check_room(self) -> None:
        """A 429 where the queue is full."""
        waiting, most = len(self.batcher.pending), self.limits.max_queue
        if waiting >= most:
            raise RequestError(
                429,
                f"the queue is full: {waiting} waiting, this server's max_queue ({most}); try again shortly (aiayn serve "
                "--max-queue)",
                headers={"Retry-After": "1"},
            )

    async def streamed(
        self,
        request: Request,
        one: Served,
        endpoint: str,
        items: list[str],
        options: dict,
        terms: Terms,
        streams: list[TextStream],
        answer_of: Callable[[list[Any]], dict[str, Any]],
    ) -> StreamingResponse:
        """The request's answer as server-sent events (streaming.py), decoded alone; its first event is awaited here,
        so that a refusal before it (a beam to stream, a line too long, the deadline) is an error with its status."""

        def answered(on_tokens: OnTokens) -> Awaitable[list[Any]]:
            return self.queue(request, one, endpoint, items, items, options, True, terms, on_tokens)

        def texts_of(found: list[Any]) -> list[str]:
            return [f["hypotheses"][0]["text"] for f in found] if endpoint == "translate" else list(found)

        events = stream_events(answered, streams, texts_of, answer_of, request_id(request.scope) or "")
        first = await anext(events, "")
        return StreamingResponse(_chained(first, events), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    def past_deadline(self, timeout_s: float | None) -> RequestError:
        """The 504 of a request that had no answer by its deadline (its own `timeout_s`, or the server's)."""
        most = self.limits.request_timeout_s
        if timeout_s is not None:
            return RequestError(
                504,
                f"timeout_s: no answer within {timeout_s:g} s; its work was stopped (a request may ask for up to "
                f"{most:g} s: aiayn serve --request-timeout-s)",
                "timeout_s",
            )
        return RequestError(
            504,
            f"no answer within this server's {most:g} s (aiayn serve --request-timeout-s); its work was stopped: send "
            "fewer lines, or ask for less (a smaller beam or n_best, fewer new tokens)",
        )


async def _chained(first: str, rest: AsyncIterator[str]) -> AsyncIterator[str]:
    if first:
        yield first
    async for event in rest:
        yield event


def _outputs(endpoint: str, found: list[Any]) -> list[str]:
    """The texts an answer holds, whose tokens aiayn_tokens_out counts: each hypothesis of a
    translation, each continuation (with its prompt) of a generation, none of a score."""
    if endpoint == "translate":
        return [h["text"] for line in found for h in line["hypotheses"]]
    return [str(text) for text in found] if endpoint == "generate" else []


def check_own_settings(one: Served, limits: Limits) -> None:
    """A served run's own decode settings, which a request that names none uses, within the server's limits."""
    decode = one.model.spec.decode
    for setting, value, limit, flag in (
        ("beam", decode.beam, limits.max_beam, "--max-beam"),
        ("max_len_b", decode.max_len_b, limits.max_new_tokens, "--max-new-tokens"),
        ("max_input_len", decode.max_input_len, limits.max_input_len, "--max-input-len"),
    ):
        if one.model.reads_sources and value > limit:
            raise UserError(
                f"{one.name}: its decode.{setting} is {value}, more than this server allows ({limit}): raise {flag}, or "
                f"serve it with a lower one (aiayn serve reads the run's decode section)"
            )


CALLS: dict[str, Callable[[Served, list[Any], dict[str, Any]], list[Any]]] = {
    "translate": run_translate,
    "score": run_score,
    "generate": run_generate,
}


def create_app(served: Sequence[Served], limits: Limits = Limits()) -> FastAPI:
    """The application serving `served` (the first is the default model).

    :param served: the models, by name
    :param limits: request limits and batching settings"""
    service = Service(served, limits)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await service.batcher.close()  # after uvicorn has drained the requests in flight

    app = FastAPI(title="aiayn serve", description=__doc__, version=_version(), lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.service = service
    add_error_handlers(app)
    app.add_middleware(BodyLimit, limit=limits.max_request_bytes, timeout=limits.request_timeout_s)
    if limits.cors_origins:  # a page of another origin may call it: the origins named, and no credentials
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(limits.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["Content-Type", "X-Request-ID"],
            expose_headers=["X-Request-ID"],
        )
    app.add_middleware(RequestIds, metrics=service.metrics)  # outermost of ours: every answer has its id
    _add_translation_routes(app, service)
    _add_score_route(app, service)
    _add_language_model_routes(app, service)
    _add_info_routes(app, service)
    return app


def _add_translation_routes(app: FastAPI, service: Service) -> None:
    @app.post("/translate", response_model=TranslateResponse, response_model_exclude_none=True, responses=STREAMS)
    async def translate(body: TranslateRequest, request: Request) -> Any:
        """What `aiayn translate` gives for `lines` with these options (the run's decode settings
        by default)."""
        one = service.pick(body.model, "/translate")
        service.check_lines(body.lines, "lines")
        terms = service.check_limits(body, one)
        options = body.model_dump(exclude={"model", "lines", *PER_REQUEST})
        # a strategy that draws takes one generator over its batch: its lines alone, not beside another request's
        alone = body.sampling or body.mbr_references is not None or body.strategy is not None or one.draws

        def answer(found: list[Any]) -> dict[str, Any]:
            words = {"source_words": [f["words"] for f in found]} if body.alignments else {}
            return {"model": one.name, "translations": [f["hypotheses"] for f in found], **words}

        if body.stream:
            if body.detokenize:
                raise RequestError(
                    400, "stream: detokenize undoes the run's tokenization once an output ends; drop one", "stream"
                )
            decode = one.model.output_tokenizer.decode
            streams = [TextStream(decode) for _ in body.lines]
            return await service.streamed(request, one, "translate", body.lines, options, terms, streams, answer)
        return answer(await service.queue(request, one, "translate", body.lines, body.lines, options, alone, terms))


def _add_score_route(app: FastAPI, service: Service) -> None:
    @app.post("/score", response_model=ScoreResponse, responses=ERRORS)
    async def score(body: ScoreRequest, request: Request) -> Any:
        """What `aiayn score` gives: `src` and `tgt` for a translation model, `text` for a language model."""
        one = service.pick(body.model, "/score")
        terms = service.check_limits(body, one)
        options = body.model_dump(exclude={"model", "src", "tgt", "text", *PER_REQUEST})
        if not one.model.reads_sources:  # a language model's lines
            _check_text_request(one, body, options)
            assert body.text is not None
            service.check_lines(body.text, "text")
            found = await service.queue(request, one, "score", body.text, body.text, options, terms=terms)
        else:
            if body.text is not None or body.src is None or body.tgt is None:
                field = "text" if body.text is not None else "src" if body.src is None else "tgt"
                raise RequestError(
                    422, f"{field}: {one.name!r} is a translation model: give src and tgt, one target a source", field
                )
            if len(body.src) != len(body.tgt):
                raise RequestError(
                    422, f"tgt: {len(body.src)} sources but {len(body.tgt)} targets: give one target a source", "tgt"
                )
            service.check_lines(body.src, "src")
            found = await service.queue(
                request, one, "score", list(zip(body.src, body.tgt)), body.src + body.tgt, options, terms=terms
            )
        return {"model": one.name, "scores": found}


def _check_text_request(one: Served, body: ScoreRequest, options: dict[str, Any]) -> None:
    """A language model's /score: its lines as `text`, and no option but max_tokens."""
    if body.text is None:
        raise RequestError(422, f"text: {one.name!r} is a language model: give the lines to score as text", "text")
    given = next((k for k, v in options.items() if k != "max_tokens" and v not in (None, False)), None)
    given = given or ("src" if body.src is not None else "tgt" if body.tgt is not None else None)
    if given is not None:
        raise RequestError(422, f"{given}: a language model scores its lines alone (text, max_tokens)", given)


def _add_language_model_routes(app: FastAPI, service: Service) -> None:
    @app.post("/generate", response_model=GenerateResponse, responses=STREAMS)
    async def generate(body: GenerateRequest, request: Request) -> Any:
        """What `aiayn generate` prints: each prompt with its continuation (each prompt draws from
        a generator of its own: batching changes no sample)."""
        one = service.pick(body.model, "/generate")
        service.check_lines(body.prompts, "prompts")
        terms = service.check_limits(body, one)
        options = body.model_dump(exclude={"model", "prompts", *PER_REQUEST})
        if body.stream:
            assert isinstance(one.model, LanguageModel)
            decode = one.model.output_tokenizer.decode
            streams = [TextStream(decode, ids) for ids in one.model.prompt_ids(body.prompts)]
            return await service.streamed(
                request,
                one,
                "generate",
                body.prompts,
                options,
                terms,
                streams,
                lambda texts: {"model": one.name, "texts": texts},
            )
        texts = await service.queue(request, one, "generate", body.prompts, body.prompts, options, terms=terms)
        return {"model": one.name, "texts": texts}


def _add_info_routes(app: FastAPI, service: Service) -> None:
    @app.get("/health")
    async def health() -> dict[str, Any]:
        """Liveness, and what the batcher has done."""
        batcher = service.batcher
        counts = asdict(batcher.counts)
        return {
            "status": "ok",
            "models": list(service.models),
            "queued": len(batcher.pending),
            "running": batcher.running,
            "lanes": {name: {"queued": len(lane.pending), "running": lane.running} for name, lane in batcher.lanes.items()},
            **counts,
        }

    @app.get("/models")
    async def list_models() -> dict[str, Any]:
        """Each model: its task, graph, exact parameters, tokenizer and decode settings; the batching settings."""
        return {"models": [s.info() for s in service.served], "limits": asdict(service.limits)}

    @app.get("/metrics", response_class=PlainTextResponse)
    async def metrics() -> Response:
        """The server's metrics in Prometheus' text format (operations.py lists them)."""
        return Response(service.metrics.text(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(resources.files("aiayn.builder.serve").joinpath("page.html").read_text(encoding="utf-8"))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aiayn")
    except PackageNotFoundError:
        return "0"

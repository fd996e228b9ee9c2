"""How `aiayn serve` answers what is not a 2xx: one JSON shape, `{"error": message, "field": name}`,
for its own refusals (RequestError), the model's (UserError, in the Python API's keywords, which are
the JSON fields'), the schema's (422) and FastAPI's and Starlette's own (404, 405 with Allow, a body
that does not parse, said why), as /openapi.json documents it (ERRORS). A bug of ours is a JSON 500."""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from aiayn.builder.errors import UserError
from aiayn.builder.run.inherit import first_line
from aiayn.builder.serve.messages import ErrorBody, GenerateRequest, ScoreRequest, TranslateRequest
from aiayn.builder.serve.operations import request_id

FIELDS = {name for m in (TranslateRequest, ScoreRequest, GenerateRequest) for name in m.model_fields}
# what a POST endpoint answers besides 200, as /openapi.json documents it: the one shape every error has
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": what}
    for status, what in (
        (400, "a setting the model or the server's limits refuse; a body that does not parse"),
        (404, "no model (or endpoint) of that name"),
        (408, "a body that did not all arrive within the request timeout"),
        (413, "more lines or bytes than the server takes"),
        (415, "a body not sent as UTF-8 JSON"),
        (422, "a body that does not match the request's schema, or text that is not text"),
        (429, "the queue is full (max_queue): try again after Retry-After seconds"),
        (499, "the client closed the connection before its answer"),
        (504, "no answer within the request's timeout_s (or the server's --request-timeout-s): its work was stopped"),
        (500, "a bug of aiayn's, said as JSON (the server goes on)"),
    )
}


def usererror_field(e: UserError) -> str | None:
    """The request's field a model's refusal names first (its message starts with it), or None."""
    first = re.split(r"[\s:\[(]", str(e), maxsplit=1)[0]
    return first if first in FIELDS else None


def error_body(e: Exception, request_id: str) -> dict[str, Any]:
    """The error body of a refusal (RequestError, UserError) as a stream's error event carries it."""
    field = e.field if isinstance(e, RequestError) else usererror_field(e) if isinstance(e, UserError) else None
    return {"error": str(e), **({"field": field} if field else {}), "request_id": request_id}


class RequestError(Exception):
    """A request refused before it reaches a model: its status, message and field."""

    def __init__(self, status: int, message: str, field: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.field, self.headers = status, field, headers


def add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestError)
    async def refused(request: Request, e: RequestError) -> Response:
        return error_response(e.status, str(e), e.field, e.headers)

    @app.exception_handler(UserError)
    async def usererror_response(request: Request, e: UserError) -> Response:
        return error_response(400, str(e), usererror_field(e))

    @app.exception_handler(Exception)
    async def failed(request: Request, e: Exception) -> Response:  # a bug of ours: said as JSON, logged by uvicorn
        # answered outside the middleware that gives the others their id (Starlette's outermost): given here
        rid = request_id(request.scope)
        body = {"error": f"internal error: {type(e).__name__}: {e}", **({"request_id": rid} if rid else {})}
        return JSONResponse(body, status_code=500, headers={"X-Request-ID": rid} if rid else None)

    app.exception_handler(StarletteHTTPException)(_http_error)
    app.exception_handler(RequestValidationError)(_invalid_request)


async def _http_error(request: Request, e: StarletteHTTPException) -> Response:
    """Starlette's and FastAPI's own errors (no route, a method the route does not take, a body that does not
    parse) in this server's shape, saying what and where."""
    if e.status_code == 400:  # FastAPI read a JSON body it could not parse: say why
        return error_response(*await _unparsable(request))
    if e.status_code == 405:
        allowed = (e.headers or {}).get("Allow", "")
        return error_response(
            405, f"{request.method} {request.url.path}: this endpoint takes {allowed}", headers={"Allow": allowed}
        )
    if e.status_code == 404:
        return error_response(404, f"{request.url.path}: no such endpoint ({ENDPOINTS})")
    return error_response(e.status_code, str(e.detail))


async def _invalid_request(request: Request, e: RequestValidationError) -> Response:
    """A body FastAPI could not read as the request: the first thing wrong with it, and where."""
    error = e.errors()[0]
    kind = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    if not kind:
        return error_response(415, "the body has no Content-Type: send JSON (Content-Type: application/json)")
    if kind != "application/json" and not kind.endswith("+json"):
        return error_response(415, f"the body is {kind}: send JSON (Content-Type: application/json)")
    if error["type"] == "missing" and tuple(error["loc"]) == ("body",):
        return error_response(422, "the body is empty: send a JSON object of the request's fields (GET /openapi.json)")
    if error["type"] == "json_invalid":
        return error_response(400, f"the body is not JSON: {error.get('ctx', {}).get('error', error['msg'])}")
    loc = [str(p) for p in error["loc"] if p != "body"]
    field = ".".join(loc) or None
    if error["type"] == "extra_forbidden":
        return error_response(422, f"{field}: unknown field{_did_you_mean(field or '', error)}", field)
    if error["type"] == "missing":
        return error_response(422, f"{field}: required", field)
    if not loc:
        return error_response(422, "the body: expected a JSON object of the request's fields (GET /openapi.json)")
    return error_response(422, f"{field}: {error['msg'][0].lower() + error['msg'][1:]}", field)


def _did_you_mean(field: str, error: dict[str, Any]) -> str:
    close = difflib.get_close_matches(field.split(".")[-1], sorted(FIELDS), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def error_response(status: int, message: str, field: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message, **({"field": field} if field else {})}, status_code=status, headers=headers)


ENDPOINTS = "POST /translate, /score, /generate; GET /health, /models, /metrics, /openapi.json, /"


async def _unparsable(request: Request) -> tuple[int, str]:
    """(status, why) of a body that FastAPI could not parse as JSON: its charset, its bytes, its depth, a number."""
    charset = request.headers.get("content-type", "").partition("charset=")[2].strip().strip('"').lower()
    if charset and charset not in ("utf-8", "utf8"):
        return 415, f"the body is declared {charset}: send it as UTF-8 (JSON's encoding)"
    body = await request.body()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        return 400, f"the body is not UTF-8: byte 0x{body[e.start]:02x} at {e.start} (JSON's encoding is UTF-8)"
    try:
        json.loads(text)
    except RecursionError:
        return 400, "the body nests arrays or objects too deep to read: send the request's fields, one level deep"
    except ValueError as e:
        if "digits" in str(e):  # Python's limit on the digits of an integer it reads
            return 400, "the body holds a number of more than 4300 digits, which no field takes"
        return 400, f"the body is not JSON: {first_line(e)}"
    return 400, "the body is not JSON"

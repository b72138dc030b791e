"""Maps memory-pool's error family and request errors to one JSON shape: {error, detail}
(OpenAI's shape under /v1/ and Qdrant's under /qdrant, whose clients speak those APIs:
api/openai_compat/errors.py, api/qdrant/shape.py)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

import redis
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from api.openai_compat.errors import OpenAIError, speaks_openai, translated
from api.qdrant.shape import QdrantRefusal, error_content, is_qdrant_path, status_here
from api.qdrant.shape import error_response as qdrant_error
from shared.errors import (
    AgentBlocked,
    DimensionMismatch,
    Forbidden,
    InvalidAgentName,
    InvalidInput,
    MemoryPoolError,
    MessageDeleted,
    MessageNotFound,
    ModelMismatch,
    NotQuarantined,
    PointNotFound,
    RecallTimeout,
    RequestTooLarge,
    StoreRefused,
    Unauthorized,
    UnknownAgent,
    UpstreamUnavailable,
)
from shared.format.ids import replace_surrogates

log = logging.getLogger(__name__)

STATUS = {
    UnknownAgent: 404,
    PointNotFound: 404,
    MessageNotFound: 404,
    MessageDeleted: 410,
    NotQuarantined: 404,
    InvalidInput: 400,
    InvalidAgentName: 400,
    StoreRefused: 400,
    AgentBlocked: 409,
    DimensionMismatch: 409,
    ModelMismatch: 409,
    UpstreamUnavailable: 503,
    RecallTimeout: 503,
    RequestTooLarge: 413,
    Unauthorized: 401,
    Forbidden: 403,
}


# Codes for the errors Starlette and FastAPI raise themselves (routing, body parsing).
HTTP_CODES = {400: "invalid_json", 404: "not_found", 405: "method_not_allowed"}


def error_body(code: str, detail: str) -> dict[str, str]:
    # A detail may quote input; lone surrogates in it could not be encoded as UTF-8.
    return {"error": code, "detail": replace_surrogates(detail)}


def error_body_for(path: str, status: int, code: str, detail: str) -> dict[str, Any]:
    """The error body for a request path: OpenAI's shape under /v1/, Qdrant's under /qdrant,
    else {error, detail}."""
    if speaks_openai(path):
        return translated(status, code, detail)
    if is_qdrant_path(path):
        return error_content(detail)
    return error_body(code, detail)


def _answer(
    request: Request, status: int, code: str, detail: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    body = error_body_for(request.url.path, status, code, detail)
    return JSONResponse(body, status_code=status, headers=headers)


def _http_error(request: Request, exc: HTTPException) -> tuple[str, str]:
    """Code and detail of an error Starlette or FastAPI raised before any route ran."""
    status = exc.status_code
    code = HTTP_CODES.get(status) or HTTPStatus(status).phrase.lower().replace(" ", "_")
    if status == 404:
        return code, f"no such endpoint: {request.method} {request.url.path}"
    if status == 405:
        return code, f"{request.method} is not allowed on {request.url.path}"
    if status == 400 and exc.__cause__ is not None:
        # FastAPI's "There was an error parsing the body": JSON that json.loads refused in a
        # way other than a syntax error (bytes that are not UTF-8, a number of 5,000 digits).
        return code, f"the request body is not valid JSON ({type(exc.__cause__).__name__})"
    return code, str(exc.detail)


def _status(exc: MemoryPoolError) -> int:
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


def _where(loc: tuple) -> str:
    parts = [str(p) for p in loc if p != "body"]
    text = ""
    for part in parts:
        text += f"[{part}]" if part.isdigit() else f".{part}"
    return text.lstrip(".") or "body"


def _not_json(error: dict) -> str | None:
    """Why the body is not JSON at all, or None when it is JSON of the wrong shape."""
    if error.get("type") == "json_invalid":
        return "the request body is not valid JSON"
    if tuple(error.get("loc", ())) != ("body",):
        return None
    if error.get("type") == "missing":
        return "the request body is empty: send a JSON object with `bot` and `messages`"
    # FastAPI hands over the raw bytes when the Content-Type is absent or not JSON (it does not
    # parse those, against cross-site requests), so they never reach the model as an object.
    if isinstance(error.get("input"), bytes):
        return "the request body is not JSON: send it with Content-Type: application/json"
    return None


def listed_errors(errors: list[Any]) -> str:
    """The first five of pydantic's errors as one line: `where: what; ...` (a 422's detail)."""
    detail = "; ".join(f"{_where(e['loc'])}: {e['msg']}" for e in errors[:5])
    return detail + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")


# Qdrant answers a value out of range 422 ("Validation error"), a body of the wrong shape 400.
VALUE_ERRORS = frozenset({
    "greater_than", "greater_than_equal", "less_than", "less_than_equal", "too_short",
    "too_long", "finite_number", "value_error",
})  # fmt: skip


def _qdrant_invalid(errors: list[Any]) -> JSONResponse:
    """A /qdrant body refused in Qdrant's words and statuses."""
    first = errors[0] if errors else {"loc": ("body",), "msg": "invalid request"}
    listed = _not_json(first) or listed_errors(errors)
    if errors and all(e.get("type") in VALUE_ERRORS for e in errors):
        return qdrant_error(422, f"Validation error in JSON body: [{listed}]")
    return qdrant_error(400, f"Format error in JSON body: {listed}")


async def _qdrant_refusal(_: Request, exc: QdrantRefusal) -> JSONResponse:
    return qdrant_error(exc.status, exc.message)


async def _memory_pool_error(request: Request, exc: MemoryPoolError) -> JSONResponse:
    if is_qdrant_path(request.url.path):
        return qdrant_error(status_here(exc, _status(exc)), str(exc))
    return _answer(request, _status(exc), exc.code, str(exc))


async def _openai_error(_: Request, exc: OpenAIError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status)


async def _http(request: Request, exc: HTTPException) -> JSONResponse:
    code, detail = _http_error(request, exc)
    if is_qdrant_path(request.url.path):
        detail = f"Format error in JSON body: {detail}" if exc.status_code == 400 else detail
        return qdrant_error(exc.status_code, detail, headers=exc.headers)
    return _answer(request, exc.status_code, code, detail, exc.headers)


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = list(exc.errors())
    if is_qdrant_path(request.url.path):
        return _qdrant_invalid(errors)
    first = errors[0] if errors else {"loc": ("body",), "msg": "invalid request"}
    not_json = _not_json(first)
    if not_json:
        return _answer(request, 400, "invalid_json", not_json)
    return _answer(request, 422, "invalid_request", listed_errors(errors))


async def _redis_down(request: Request, exc: redis.RedisError) -> JSONResponse:
    # Any endpoint may touch Redis; losing it is an outage, not a bug in the request.
    detail = f"Redis is unavailable: {exc}"
    if is_qdrant_path(request.url.path):
        return qdrant_error(503, detail)
    return _answer(request, 503, UpstreamUnavailable.code, detail)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    # Clients parse every answer as JSON, errors included; the traceback goes to the log.
    log.exception("unexpected error", exc_info=exc)
    detail = f"{type(exc).__name__}: see the server log"
    if is_qdrant_path(request.url.path):
        return qdrant_error(500, f"Service internal error: {detail}")
    return _answer(request, 500, "internal_error", detail)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(QdrantRefusal, _qdrant_refusal)  # type: ignore[arg-type]
    app.add_exception_handler(MemoryPoolError, _memory_pool_error)  # type: ignore[arg-type]
    app.add_exception_handler(OpenAIError, _openai_error)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(redis.RedisError, _redis_down)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _unexpected)

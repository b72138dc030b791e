"""Maps memory-pool's error family and request errors to one JSON shape: {error, detail}."""

from __future__ import annotations

import logging
from http import HTTPStatus

import redis
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

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


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(MemoryPoolError)
    async def _memory_pool_error(_: Request, exc: MemoryPoolError) -> JSONResponse:
        return JSONResponse(error_body(exc.code, str(exc)), status_code=_status(exc))

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        code, detail = _http_error(request, exc)
        return JSONResponse(
            error_body(code, detail), status_code=exc.status_code, headers=exc.headers
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": ("body",), "msg": "invalid request"}
        not_json = _not_json(first)
        if not_json:
            return JSONResponse(error_body("invalid_json", not_json), status_code=400)
        detail = "; ".join(f"{_where(e['loc'])}: {e['msg']}" for e in errors[:5])
        if len(errors) > 5:
            detail += f"; and {len(errors) - 5} more"
        return JSONResponse(error_body("invalid_request", detail), status_code=422)

    @app.exception_handler(redis.RedisError)
    async def _redis_down(_: Request, exc: redis.RedisError) -> JSONResponse:
        # Any endpoint may touch Redis; losing it is an outage, not a bug in the request.
        detail = f"Redis is unavailable: {exc}"
        return JSONResponse(error_body(UpstreamUnavailable.code, detail), status_code=503)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        # Clients parse every answer as JSON, errors included; the traceback goes to the log.
        log.exception("unexpected error", exc_info=exc)
        detail = f"{type(exc).__name__}: see the server log"
        return JSONResponse(error_body("internal_error", detail), status_code=500)

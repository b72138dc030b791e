"""The /save body, parsed in one pass by pydantic's Rust JSON parser.

FastAPI parses a body with the stdlib's `json.loads`, then validates the Python objects: two
passes over the thirty messages the Discord plugin sends on every turn. `model_validate_json`
does both at once. Whatever it refuses (or a body that is not JSON at all) is parsed again
exactly as FastAPI parses a body, so every refusal keeps its answer (api/errors.py renders it);
and the request body is documented as FastAPI would document a `SaveRequest` parameter.
"""

from __future__ import annotations

import email.message
import json
from typing import Any, cast

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError
from starlette.exceptions import HTTPException

from api.schemas import SaveRequest

_ADAPTER: TypeAdapter[SaveRequest] = TypeAdapter(SaveRequest)

# What the /save route gives OpenAPI for its body, as FastAPI writes it for a model parameter.
_BODY_SCHEMA = {"$ref": "#/components/schemas/SaveRequest"}
OPENAPI_BODY = {
    "requestBody": {"required": True, "content": {"application/json": {"schema": _BODY_SCHEMA}}}
}


def is_json(content_type: str | None) -> bool:
    # FastAPI's rule (strict content type): application/json or application/*+json, nothing
    # else, and no header is not JSON (a cross-site form cannot send JSON by accident).
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


def _as_fastapi_parses(raw: bytes, json_body: bool) -> SaveRequest:
    """FastAPI's body handling (fastapi/routing.py, get_request_handler), for the bodies the
    one-pass parse refused: the same errors, so the same answers."""
    if not raw:
        missing = {"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}
        raise RequestValidationError([missing])
    value: Any = raw  # not JSON: validated as the bytes it is, which names it as not JSON
    if json_body:
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            error = {"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error",
                     "input": {}, "ctx": {"error": exc.msg}}  # fmt: skip
            raise RequestValidationError([error], body=exc.doc) from exc
        except Exception as exc:  # bytes that are not UTF-8, a number of 5,000 digits
            raise HTTPException(400, "There was an error parsing the body") from exc
    try:
        return _ADAPTER.validate_python(value, from_attributes=True)
    except ValidationError as exc:
        errors = [{**error, "loc": ("body", *error["loc"])} for error in exc.errors()]
        raise RequestValidationError(errors) from None


async def save_body(request: Request) -> SaveRequest:
    """The body of a /save request; refused (RequestValidationError, HTTPException) exactly as
    FastAPI refuses a body it cannot read as a SaveRequest."""
    try:
        raw = await request.body()
    except Exception as exc:  # the body cut short (api/middleware.BodyLimit answers 413)
        raise HTTPException(400, "There was an error parsing the body") from exc
    json_body = is_json(request.headers.get("content-type"))
    if raw and json_body:
        try:
            return SaveRequest.model_validate_json(raw)
        except ValidationError:
            pass  # refused, or JSON it reads otherwise (a lone surrogate): as FastAPI does
    return _as_fastapi_parses(raw, json_body)


def _as_fastapi_documents() -> dict[str, Any]:
    """The component schemas FastAPI writes for a route taking `body: SaveRequest`."""
    shadow = FastAPI()

    @shadow.post("/save")
    async def save(body: SaveRequest) -> None:
        """Never served: only documented."""

    return cast("dict[str, Any]", shadow.openapi()["components"]["schemas"])


def document_save_body(app: FastAPI) -> None:
    """Put SaveRequest (and the models it holds) in the OpenAPI components, which FastAPI fills
    only from parameters it parses itself."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()  # FastAPI's own, which it keeps as app.openapi_schema
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for name, model in _as_fastapi_documents().items():
                components.setdefault(name, model)
        return cast("dict[str, Any]", app.openapi_schema)

    app.openapi = openapi  # type: ignore[method-assign]

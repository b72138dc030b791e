"""Qdrant's answer shapes: `{"result", "status": "ok", "time"}`, its error shape
`{"status": {"error"}, "time"}`, the paths that answer in them, and their OpenAPI documents."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Generic, Literal, TypeVar

from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from api.schemas import error_responses
from shared.errors import CollectionMissing, DimensionMismatch, MemoryPoolError, ModelMismatch
from shared.format.ids import replace_surrogates

PREFIX = "/qdrant"
T = TypeVar("T")


def is_qdrant_path(path: str) -> bool:
    """Whether a request's answers, errors included, take Qdrant's shape."""
    return path == PREFIX or path.startswith(PREFIX + "/")


class QdrantRefusal(Exception):
    """An answer in Qdrant's own status and words: 404 for a collection that does not exist,
    409 for one that does, 400 for wrong input (a vector of another size)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def collection_missing(name: str) -> QdrantRefusal:
    return QdrantRefusal(404, f"Not found: Collection `{name}` doesn't exist!")


# memory-pool's errors whose status differs where Qdrant's client expects Qdrant's: a
# collection gone meanwhile is Qdrant's 404, a vector of another size its 400.
STATUS_HERE = {CollectionMissing: 404, DimensionMismatch: 400, ModelMismatch: 400}


def status_here(exc: MemoryPoolError, status: int) -> int:
    """The status of a memory-pool error under /qdrant, given its status elsewhere."""
    for cls in type(exc).__mro__:
        if cls in STATUS_HERE:
            return STATUS_HERE[cls]
    return status


def error_response(
    status: int, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(error_content(message), status_code=status, headers=headers)


def ok(result: Any, started: float) -> dict[str, Any]:
    return {"result": result, "status": "ok", "time": time.perf_counter() - started}


def error_content(message: str, elapsed: float = 0.0) -> dict[str, Any]:
    # a message may quote input; lone surrogates in it could not be encoded as UTF-8
    return {"status": {"error": replace_surrogates(message)}, "time": elapsed}


# --- OpenAPI ----------------------------------------------------------------------------------


class ErrorStatus(BaseModel):
    error: str = Field(description="What went wrong, in Qdrant's words where Qdrant has some.")


class QdrantErrorResponse(BaseModel):
    """Qdrant's error shape."""

    status: ErrorStatus
    time: float


class Answer(BaseModel, Generic[T]):
    """Qdrant's answer shape."""

    result: T
    status: Literal["ok"] = "ok"
    time: float = Field(description="Seconds the call took.")


def qdrant_errors(**described: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for error statuses, in Qdrant's error shape (e404="...")."""
    return error_responses(QdrantErrorResponse, **described)


# What every call naming a collection may answer.
ACCESS = qdrant_errors(
    e400="Format error in the JSON body, or wrong input.",
    e401="The collection's agent requires an API key (`api-key`), or the key is not valid.",
    e403="The API key is not for this collection's agent.",
    e404="No such collection, or one that is no agent's (the agents file decides).",
    e422="Validation error in the JSON body (a value out of range).",
    e503="The store (or, creating a collection, the embedding provider) is unavailable.",
)
WITH_BODY = ACCESS | qdrant_errors(
    e413="The body is over MEMORY_POOL_MAX_BODY_BYTES, or holds more points than "
    "MEMORY_POOL_MAX_MESSAGES or more characters of `text` than MEMORY_POOL_MAX_CHARS."
)
UPSERT = WITH_BODY | qdrant_errors(
    e503="The store is unavailable, or the BM25 terms of a large upsert could not be made "
    "(four large upserts already waiting, or their process stopped or did not answer in time); "
    "nothing was written, send it again."
)

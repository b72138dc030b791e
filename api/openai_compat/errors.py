"""OpenAI's error shape, {"error": {"message", "type", "param", "code"}}, for every answer under
/v1/: the endpoint's own refusals, and memory-pool's errors (the door's too) translated."""

from __future__ import annotations

from typing import Any

from shared.format.ids import replace_surrogates

# Paths whose clients speak OpenAI's API: their errors take OpenAI's shape.
OPENAI_PREFIX = "/v1"

# memory-pool's error codes that OpenAI spells otherwise (an unknown URL has none).
_CODES: dict[str, str | None] = {"unauthorized": "invalid_api_key", "not_found": None}


def speaks_openai(path: str) -> bool:
    return path == OPENAI_PREFIX or path.startswith(OPENAI_PREFIX + "/")


def error_type(status: int) -> str:
    """OpenAI's `type` for a status: the server's fault, a rate limit, or the request's."""
    if status >= 500:
        return "server_error"
    if status == 429:
        return "rate_limit_exceeded"
    return "invalid_request_error"


def openai_error_body(
    status: int, message: str, *, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    error = {
        "message": replace_surrogates(message),  # it may quote input
        "type": error_type(status),
        "param": param,
        "code": code,
    }
    return {"error": error}


def translated(status: int, code: str, detail: str) -> dict[str, Any]:
    """One of memory-pool's errors ({error: code, detail}) in OpenAI's shape."""
    return openai_error_body(status, detail, code=_CODES.get(code, code))


class OpenAIError(Exception):
    """A refusal of the OpenAI-compatible endpoint, answered as OpenAI answers it."""

    def __init__(
        self, status: int, message: str, *, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return openai_error_body(self.status, self.message, param=self.param, code=self.code)

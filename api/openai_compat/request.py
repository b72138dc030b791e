"""An embeddings request read and checked as OpenAI checks it: the body, the size limits, the
model and the dimensions; every refusal is an OpenAIError."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from api.openai_compat.errors import OpenAIError
from api.openai_compat.schemas import EmbeddingsRequest
from api.save_body import is_json
from shared.format.ids import replace_surrogates, shown
from shared.settings import Settings

_API_REFERENCE = "Please check the API reference: https://platform.openai.com/docs/api-reference."
_NOT_JSON = (
    "We could not parse the JSON body of your request. The OpenAI API expects a JSON payload "
    "(Content-Type: application/json)."
)


@dataclass(frozen=True)
class Wanted:
    """What to embed and how to answer it."""

    texts: list[str]
    encoding: Literal["float", "base64"]
    dimensions: int | None


def parse(raw: bytes, content_type: str | None) -> EmbeddingsRequest:
    """The request in `raw`; 400 in OpenAI's words for anything else."""
    if not is_json(content_type):
        raise OpenAIError(400, _NOT_JSON)
    try:
        value: Any = json.loads(raw)  # the stdlib reads lone surrogates; pydantic's parser not
    except (ValueError, RecursionError) as exc:  # not UTF-8, 5,000 digits, nested too deep
        raise OpenAIError(400, _NOT_JSON) from exc
    if not isinstance(value, dict):
        raise OpenAIError(400, "The request body must be a JSON object.")
    try:
        return EmbeddingsRequest.model_validate({k: _cleaned(v) for k, v in value.items()})
    except ValidationError as exc:
        raise _refusal(exc.errors()[0], value) from None


def _cleaned(value: Any) -> Any:
    """Lone surrogates (a broken JavaScript string) become U+FFFD, as /save stores them."""
    if isinstance(value, str):
        return replace_surrogates(value)
    if isinstance(value, list):
        return [replace_surrogates(v) if isinstance(v, str) else v for v in value]
    return value


def _refusal(error: Any, body: dict[str, Any]) -> OpenAIError:
    """The first problem pydantic found, as OpenAI words it for that field."""
    param = str(error["loc"][0]) if error["loc"] else None
    given = shown(repr(body.get(param))) if param else None
    if param == "input":
        return OpenAIError(
            400,
            f"'$.input' is invalid. {_API_REFERENCE} (memory-pool takes a text or a list of "
            "texts, none of them empty; token arrays are not taken)",
            param=param,
        )
    if param == "model":
        return OpenAIError(400, "you must provide a model parameter", param=param)
    if param == "encoding_format":
        message = f"{given} is not one of ['float', 'base64'] - 'encoding_format'"
        return OpenAIError(400, message, param=param)
    if param == "dimensions":
        message = f"Invalid value for 'dimensions' = {given}. It must be a positive integer."
        return OpenAIError(400, message, param=param)
    return OpenAIError(400, f"Invalid value for {param!r}: {error['msg']}", param=param)


def check_limits(texts: list[str], settings: Settings) -> None:
    """/save's limits (MEMORY_POOL_MAX_MESSAGES, MEMORY_POOL_MAX_CHARS): 413 beyond them."""
    if len(texts) > settings.max_messages_per_request:
        raise OpenAIError(
            413,
            f"{len(texts)} inputs in one request; the limit is "
            f"{settings.max_messages_per_request} (MEMORY_POOL_MAX_MESSAGES)",
            param="input",
            code="request_too_large",
        )
    chars = sum(len(text) for text in texts)
    if chars > settings.max_chars_per_request:
        raise OpenAIError(
            413,
            f"{chars} characters of input in one request; the limit is "
            f"{settings.max_chars_per_request} (MEMORY_POOL_MAX_CHARS)",
            param="input",
            code="request_too_large",
        )


def check_model(requested: str, served: str, settings: Settings) -> None:
    """Another model than memory-pool's is served by it, or refused as OpenAI refuses an
    unknown model when MEMORY_POOL_EMBEDDINGS_ANY_MODEL is false."""
    if requested == served or settings.embeddings_any_model:
        return
    raise OpenAIError(
        404,
        f"The model '{shown(requested)}' does not exist; memory-pool embeds with '{served}' "
        "(EMBEDDING_MODEL)",
        param="model",
        code="model_not_found",
    )


def check_dimensions(requested: int | None, size: int, model: str) -> None:
    """A `dimensions` other than the model's size is refused: a shortened vector would not
    compare with memory-pool's own."""
    if requested is None or requested == size:
        return
    raise OpenAIError(
        400,
        f"Invalid value for 'dimensions' = {requested}. '{model}' embeds in {size} dimensions "
        "here (EMBEDDING_DIMENSIONS); ask for those or leave 'dimensions' out.",
        param="dimensions",
    )


def wanted(body: EmbeddingsRequest, served: str, settings: Settings) -> Wanted:
    """The request's texts, once its size and model pass."""
    texts = [body.input] if isinstance(body.input, str) else body.input
    check_limits(texts, settings)
    check_model(body.model, served, settings)
    return Wanted(texts, body.encoding_format or "float", body.dimensions)

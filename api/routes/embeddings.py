"""POST /v1/embeddings: OpenAI's embeddings API served by memory-pool's own embedder, so
st-qdrant-memory embeds with the same model and size as memory-pool, and no key leaves."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic_core import to_json

from api import deps
from api.auth import check_any_key
from api.deps import RuntimeDep
from api.openai_compat import request as embeddings_request
from api.openai_compat.errors import OpenAIError
from api.openai_compat.schemas import EmbeddingsRequest, EmbeddingsResponse, OpenAIErrorResponse
from api.openai_compat.service import answer, embed
from api.schemas import error_responses

router = APIRouter()


RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": EmbeddingsResponse, "description": "One embedding per input, in order."},
    **error_responses(
        OpenAIErrorResponse,
        e400="Not JSON, a bad input, `dimensions` other than the model's, or an input the "
        "embedding provider refused.",
        e401="API keys are configured and the request has none, or a wrong one.",
        e404="Another model, when MEMORY_POOL_EMBEDDINGS_ANY_MODEL is false.",
        e413="Over MEMORY_POOL_MAX_MESSAGES inputs or MEMORY_POOL_MAX_CHARS characters, or "
        "over MEMORY_POOL_MAX_BODY_BYTES.",
        e503="The embedding provider is unavailable, or every embeddings slot stayed taken.",
    ),
}
OPENAPI_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": EmbeddingsRequest.model_json_schema()}},
    }
}


@router.post("/v1/embeddings", responses=RESPONSES, openapi_extra=OPENAPI_BODY)
async def embeddings(request: Request, runtime: RuntimeDep) -> Response:
    """Embed texts as OpenAI's API does, with memory-pool's embedding model. Any valid API key
    may call it once keys are configured (Authorization: Bearer <key>)."""
    check_any_key(runtime.agents, request.headers)
    try:
        raw = await request.body()
    except Exception as exc:  # the body cut short (api/middleware.BodyLimit answers 413)
        raise OpenAIError(400, "the request body could not be read") from exc
    body = embeddings_request.parse(raw, request.headers.get("content-type"))
    embedder = runtime.embedder
    wanted = embeddings_request.wanted(body, embedder.model, runtime.settings)
    vectors = await embed(wanted, embedder, deps.embedding_slots(request), runtime.settings)
    payload = answer(wanted, vectors, embedder.model)
    return Response(to_json(payload), media_type="application/json")

"""POST /save: accept messages for the write path; one atomic Redis step, nothing slower."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from api.deps import RuntimeDep, agent_for
from api.ingest import check_limits, ingest
from api.schemas import ErrorResponse, SaveRequest, SaveResponse
from shared.buffers import ConversationSettings

router = APIRouter()

ERRORS = {
    400: {"model": ErrorResponse, "description": "Not JSON, or an invalid agent name."},
    401: {"model": ErrorResponse, "description": "The agent requires an API key."},
    403: {"model": ErrorResponse, "description": "The API key is not for this agent."},
    404: {"model": ErrorResponse, "description": "Unknown agent."},
    409: {"model": ErrorResponse, "description": "The agent's collection has another model."},
    413: {"model": ErrorResponse, "description": "Too many messages or characters."},
    422: {"model": ErrorResponse, "description": "Missing bot, messages or a message_id."},
    503: {"model": ErrorResponse, "description": "Redis is unavailable; nothing was accepted."},
}


@router.post("/save", status_code=202, response_model=SaveResponse, responses=ERRORS)
async def save(body: SaveRequest, request: Request, runtime: RuntimeDep) -> SaveResponse:
    """Buffer new messages; already seen ids count as duplicates, short ones as skipped."""
    check_limits(body, runtime.settings)
    agent = agent_for(body.bot, runtime, request)
    result = ingest(body, agent, body.source or runtime.settings.default_source)
    conv = ConversationSettings(
        min_chars=agent.chunk_min_chars,
        gap_seconds=agent.chunk_gap_seconds,
        idle_seconds=agent.idle_flush_seconds,
        idle_timer=not body.batch_import,
    )
    counts = await run_in_threadpool(runtime.buffers.save, agent.name, result.incoming, conv)
    return SaveResponse(
        accepted=counts.accepted, duplicates=counts.duplicates, skipped=result.skipped
    )

"""POST /save: accept messages for the write path; one atomic Redis step, nothing slower."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request, Response

from api.deps import agent_for, agent_names, meters, runtime_of, saver
from api.ingest import Ingest, check_limits, ingest
from api.save_body import OPENAPI_BODY, save_body
from api.schemas import AGENT_ACCESS, SaveRequest, SaveResponse, error_docs
from shared.errors import AgentBlocked
from shared.format.flush_plan import idle_seconds
from shared.format.ids import shown
from shared.ops import log_context
from shared.runtime import Runtime
from shared.state.buffers import AgentRef, ConversationSettings

log = logging.getLogger(__name__)

router = APIRouter()

JSON = "application/json"

ERRORS = AGENT_ACCESS | error_docs(
    e400="Not JSON, or an invalid agent name.",
    e409="The agent's collection has another model.",
    e413="Too many messages or characters.",
    e422="Missing bot, messages or a message_id, or a bad source.",
    e503="Redis is unavailable; nothing was accepted.",
)


def _log_refusals(bot: str, result: Ingest, total: int) -> None:
    # The Discord plugin ignores the answer: the log is where a refused message shows.
    first = result.refusals[0]
    log.warning(
        "agent %r: refused %d of %d messages; first: message %r: %s",
        shown(bot), len(result.refusals), total, first.message_id, first.reason,
    )  # fmt: skip


@router.post(
    "/save",
    status_code=202,
    response_model=SaveResponse,
    response_model_exclude_defaults=True,
    responses=ERRORS,
    openapi_extra=OPENAPI_BODY,
)
async def save(request: Request) -> Response:
    """Buffer new messages; already seen ids count as duplicates, short ones as skipped, and
    messages that cannot be stored as refused (each with its reason). A seen id with another
    text is an edit (README "Edits"): counted `edited`, or `stale` when its chunk cannot be
    rebuilt."""
    # The firehose's route does by hand what FastAPI would do for it: the body and the runtime
    # are calls, not dependencies, and the answer is rendered once, as response_model_exclude_
    # defaults renders it, instead of validated again against SaveResponse (together a tenth
    # of /save's CPU, BENCHMARKS.md 1.6).
    body = await save_body(request)
    answer = await save_messages(body, request, runtime_of(request))
    return Response(answer.model_dump_json(exclude_defaults=True), 202, media_type=JSON)


async def save_messages(body: SaveRequest, request: Request, runtime: Runtime) -> SaveResponse:
    """/save once its body is read: also the MCP server's `remember` (api/mcp), with the request
    that carried the tool call (its key)."""
    check_limits(body, runtime.settings)
    agent = await agent_names(request).canonical(agent_for(body.bot, runtime, request))
    log_context.set_field("agent", agent.name)
    source = body.source or runtime.settings.default_source
    result = ingest(body, agent, source)
    if result.refusals:
        _log_refusals(body.bot, result, len(body.messages))
    conv = ConversationSettings(
        min_chars=agent.chunk_min_chars,
        gap_seconds=agent.chunk_gap_seconds,
        idle_seconds=idle_seconds(agent.idle_flush_seconds, idle_timer=not body.batch_import),
        idle_timer=not body.batch_import,
    )
    who = AgentRef(name=agent.name, collection=agent.collection_name)
    meter = meters(request)
    try:
        counts = await saver(request).save(who, result.batches, conv)
    except AgentBlocked:
        if meter is not None:
            meter.held(agent.name, source, len(body.messages))
        raise
    if meter is not None:
        meter.saved(agent.name, source, counts, result)
    if counts.stale:
        log.info("agent %r: %d edits of messages whose chunks cannot be rebuilt (older points)",
                 agent.name, counts.stale)  # fmt: skip
    return SaveResponse(
        accepted=counts.accepted,
        duplicates=counts.duplicates,
        skipped=counts.skipped,
        edited=counts.edited,
        stale=counts.stale,
        refused=len(result.refusals),
        refusals=result.refusals,
    )

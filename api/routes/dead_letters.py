"""Dead letters: chunks the embedding provider refused for good, listed and replayed; beside
them, the quarantined conversations (api/routes/quarantine.py), which a replay releases."""

from __future__ import annotations

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from api.deps import GlobalAccess, RuntimeDep
from api.routes.quarantine import quarantine_page, release
from api.schemas import ErrorResponse, QuarantinedConversation
from shared.format import fields

MAX_OFFSET = 1_000_000_000
QUARANTINE_SHOWN = 100

router = APIRouter(
    dependencies=[GlobalAccess],
    responses={
        401: {"model": ErrorResponse, "description": "A key valid for every agent is needed."},
        403: {"model": ErrorResponse, "description": "The key is limited to some agents."},
    },
)


class DeadLetterView(BaseModel):
    agent: str
    collection: str
    point_id: str
    reason: str = Field(description="What the embedding provider said.")
    at: int = Field(description="When it was refused, Unix ms.")
    message_ids: list[str]
    text: str


class DeadLetterList(BaseModel):
    total: int
    entries: list[DeadLetterView]
    quarantined_total: int = Field(
        0, description="Conversations in quarantine: whole conversations, not chunks."
    )
    quarantined: list[QuarantinedConversation] = Field(
        default_factory=list,
        description=f"The oldest {QUARANTINE_SHOWN} of them; GET /quarantine pages through all.",
    )


class ReplayRequest(BaseModel):
    bot: str | None = Field(None, description="Replay only this agent's dead letters.")


class ReplayResponse(BaseModel):
    queued: int = Field(description="Dead letters moved to the replay queue.")
    released: int = Field(0, description="Quarantined conversations released to be tried again.")


@router.get("/dead-letters", response_model=DeadLetterList)
async def list_dead_letters(
    runtime: RuntimeDep,
    # Redis takes 64-bit offsets; a billion is far past any real list and leaves room.
    offset: int = Query(0, ge=0, le=MAX_OFFSET),
    limit: int = Query(100, ge=1, le=1000),
) -> DeadLetterList:
    """Chunks refused for good, oldest first, with the provider's reason."""
    total, letters = await run_in_threadpool(runtime.dead_letters.list, offset=offset, limit=limit)
    entries = [
        DeadLetterView(
            agent=letter.agent,
            collection=letter.collection,
            point_id=letter.point_id,
            reason=letter.reason,
            at=letter.at,
            message_ids=[str(i) for i in letter.payload.get(fields.MESSAGE_ID_LIST, [])],
            text=str(letter.payload.get(fields.TEXT, "")),
        )
        for letter in letters
    ]
    held, quarantined = await run_in_threadpool(quarantine_page, runtime, None, 0, QUARANTINE_SHOWN)
    return DeadLetterList(
        total=total, entries=entries, quarantined_total=held, quarantined=quarantined
    )


@router.post(
    "/dead-letters/replay",
    status_code=202,
    response_model=ReplayResponse,
    responses={
        400: {"model": ErrorResponse, "description": "Not JSON, or an invalid agent name."},
        404: {"model": ErrorResponse, "description": "Unknown agent."},
    },
)
async def replay_dead_letters(
    runtime: RuntimeDep, body: ReplayRequest | None = None
) -> ReplayResponse:
    """Try the dead letters again (for example after changing the model settings), and
    release the quarantined conversations (of the agent, or all)."""
    # An agent is its collection: its dead letters are those of its collection, whatever
    # spelling wrote them (404 for an unknown agent).
    collection = runtime.agents.get(body.bot).collection_name if body and body.bot else None
    queued = await run_in_threadpool(runtime.dead_letters.queue_replay, collection)
    # Replaying is trying again what was refused: quarantined conversations too.
    released = await run_in_threadpool(release, runtime, collection, None)
    return ReplayResponse(queued=queued, released=released)

"""The quarantine: conversations set aside by a flush failure retrying cannot fix, listed and
released (after a fix) to be written again."""

from __future__ import annotations

import time

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from api.deps import GlobalAccess, RuntimeDep
from api.schemas import QuarantinedConversation, error_docs
from shared.errors import NotQuarantined
from shared.runtime import Runtime
from shared.state.buffer_deletes import BufferDeletes, BufferScope
from shared.state.conversations import collection_of, source_of

MAX_OFFSET = 1_000_000_000

router = APIRouter(
    prefix="/quarantine",
    dependencies=[GlobalAccess],
    responses=error_docs(
        e401="A key valid for every agent is needed.",
        e403="The key is limited to some agents.",
    ),
)
AGENT_ERRORS = error_docs(e400="Not JSON, or an invalid agent name.", e404="Unknown agent.")


class QuarantineList(BaseModel):
    total: int = Field(description="Quarantined conversations (of the agent, if one is given).")
    entries: list[QuarantinedConversation]


class ReleaseRequest(BaseModel):
    # Without a choice every conversation is released: a misspelt field or an empty `bot`
    # must not silently mean "all" (as a delete's unknown field is refused too).
    model_config = ConfigDict(extra="forbid")

    bot: str | None = Field(
        None, min_length=1, description="Release only this agent's conversations."
    )
    conversation: str | None = Field(
        None, max_length=2048, description="Release only this conversation (its key, as listed)."
    )


class DiscardRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    conversation: str = Field(
        max_length=2048, description="The quarantined conversation (its key, as listed)."
    )


class DiscardResponse(BaseModel):
    discarded: int = Field(description="Buffered messages deleted with it (tombstoned).")


class ReleaseResponse(BaseModel):
    released: int = Field(description="Conversations due again now; still failing, they return.")


def quarantine_page(
    runtime: Runtime, collection: str | None, offset: int, limit: int
) -> tuple[int, list[QuarantinedConversation]]:
    members = runtime.quarantine.members(collection)
    page = runtime.quarantine.entries(members[offset : offset + limit])
    entries = [QuarantinedConversation.model_validate(e, from_attributes=True) for e in page]
    return len(members), entries


def release(runtime: Runtime, collection: str | None, conversation: str | None) -> int:
    """Release the quarantined conversations chosen (all when nothing is chosen)."""
    chosen = [
        member
        for member, _ in runtime.quarantine.members(collection)
        if conversation is None or member == conversation
    ]
    return runtime.quarantine.release(chosen)


@router.get("", response_model=QuarantineList, responses=AGENT_ERRORS)
async def list_quarantine(
    runtime: RuntimeDep,
    bot: str | None = Query(None, description="Only this agent's conversations."),
    offset: int = Query(0, ge=0, le=MAX_OFFSET),
    limit: int = Query(100, ge=1, le=1000),
) -> QuarantineList:
    """Quarantined conversations, oldest first, with the reason and the messages they hold."""
    collection = runtime.agents.get(bot).collection_name if bot else None
    total, entries = await run_in_threadpool(quarantine_page, runtime, collection, offset, limit)
    return QuarantineList(total=total, entries=entries)


@router.post("/release", response_model=ReleaseResponse, responses=AGENT_ERRORS)
async def release_quarantine(
    runtime: RuntimeDep, body: ReleaseRequest | None = None
) -> ReleaseResponse:
    """Try quarantined conversations again (after a fix): by agent and/or conversation, or
    all. Their messages were kept; one that still fails returns to the quarantine."""
    bot = body.bot if body else None
    collection = runtime.agents.get(bot).collection_name if bot else None
    conversation = body.conversation if body else None
    released = await run_in_threadpool(release, runtime, collection, conversation)
    return ReleaseResponse(released=released)


def discard(runtime: Runtime, conversation: str) -> int:
    """Delete a quarantined conversation's buffered messages, as a delete would (tombstoned,
    so a re-send is not stored), and take it out of the quarantine."""
    if not runtime.quarantine.is_quarantined(conversation):
        raise NotQuarantined(f"conversation {conversation!r} is not quarantined")
    deletes = BufferDeletes(runtime.redis)
    removed = deletes.forget([conversation], BufferScope("all"), int(time.time() * 1000)).removed
    ids = [message_id for _, message_id in removed if message_id is not None]
    deletes.tombstone(collection_of(conversation), [(source_of(conversation), ids)])
    runtime.quarantine.drop(conversation)  # an empty one is not released by the delete
    return len(removed)


@router.post(
    "/discard",
    response_model=DiscardResponse,
    responses=error_docs(e400="Not JSON.", e404="The conversation is not quarantined."),
)
async def discard_quarantined(runtime: RuntimeDep, body: DiscardRequest) -> DiscardResponse:
    """Give up on a quarantined conversation no fix can write (an agent name no collection
    can have, which no delete accepts): its buffered messages are deleted for good."""
    return DiscardResponse(discarded=await run_in_threadpool(discard, runtime, body.conversation))

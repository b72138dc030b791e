"""The quarantine: conversations set aside by a flush failure retrying cannot fix, listed and
released (after a fix) to be written again."""

from __future__ import annotations

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from api.deps import GlobalAccess, RuntimeDep
from api.schemas import QuarantinedConversation, error_docs
from shared.runtime import Runtime

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
    bot: str | None = Field(None, description="Release only this agent's conversations.")
    conversation: str | None = Field(
        None, max_length=2048, description="Release only this conversation (its key, as listed)."
    )


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

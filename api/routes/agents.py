"""Per-agent management: stats, and deletes scoped to a source, conversation, message or user."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, model_validator

from api.deps import AgentCallsDep, AgentDep, RuntimeDep
from api.health import lexical_state
from api.schemas import (
    AGENT_ACCESS,
    QuarantinedConversation,
    Source,
    StorableId,
    StorableMessageId,
)
from shared.agents import AgentConfig
from shared.format.fields import SOURCE
from shared.memories.deletes import DeleteResult, DeleteScope, delete
from shared.memories.known_ids import known_messages
from shared.runtime import Runtime
from shared.state import keys
from shared.store.filters import Filter, IsEmpty

router = APIRouter(prefix="/agents/{bot}")


class DeleteRequest(BaseModel):
    """Exactly one scope, always within the agent in the path. There is no "delete all"."""

    model_config = ConfigDict(extra="forbid")

    # The id rules of /save (shared/format/ids.py): an id that can never be stored is a 422, not a
    # tombstone that would block a different, storable id.
    source: Source | None = Field(None, description="Every point from this interface.")
    channel_id: StorableId | None = Field(
        None, min_length=1, description="With source: one channel."
    )
    conversation_id: StorableId | None = Field(None, min_length=1, description="With source: one.")
    message_id: StorableMessageId | None = Field(
        None, min_length=1, description="Every chunk holding it."
    )
    user_id: StorableId | None = Field(None, min_length=1, description="Every chunk they speak in.")

    @model_validator(mode="after")
    def _one_scope(self) -> DeleteRequest:
        chosen = [
            name
            for name, value in (
                ("message_id", self.message_id),
                ("user_id", self.user_id),
                ("source", self.source),
            )
            if value is not None
        ]
        if len(chosen) != 1:
            raise ValueError(
                "name exactly one scope: source (optionally with channel_id or "
                "conversation_id), message_id, or user_id"
            )
        if (self.channel_id or self.conversation_id) and self.source is None:
            raise ValueError("channel_id and conversation_id need the source they belong to")
        if self.channel_id and self.conversation_id:
            raise ValueError("give channel_id or conversation_id, not both")
        return self


class DeleteResponse(BaseModel):
    deleted_points: int = Field(description="Points that went from the agent's collection.")
    rewritten_points: int = Field(
        0,
        description="Points written again without the deleted messages (their other "
        "messages stay).",
    )
    deleted_buffered: int = Field(description="Buffered messages that went before being stored.")
    deleted_dead_letters: int

    @classmethod
    def of(cls, result: DeleteResult) -> DeleteResponse:
        return cls(
            deleted_points=result.points,
            rewritten_points=result.rewritten,
            deleted_buffered=result.buffered,
            deleted_dead_letters=result.dead_letters,
        )


class KnownIdsRequest(BaseModel):
    message_ids: list[StorableMessageId] = Field(max_length=100_000)
    source: Source | None = Field(
        None,
        description="Also answer `fingerprints` for the chunks of this source (an importer "
        "telling an edited message from a re-send).",
    )


class KnownIdsResponse(BaseModel):
    known: list[str] = Field(description="The given ids already in the agent's collection.")
    fingerprints: dict[str, str] | None = Field(
        None,
        description="Only when a source was given: for each known id held by a chunk of that "
        "source that can be rebuilt, the fingerprint of its stored text (16 hex digits of the "
        "BLAKE2b of the cleaned, trimmed text, shared/format/fingerprint.py). A known id without "
        "one (st-qdrant-memory's points, older ones) has no text to compare: an edit of it "
        "would be stale.",
    )


class StatsResponse(BaseModel):
    collection: str
    points: int
    points_by_source: dict[str, int] = Field(
        description="memory-pool's points per source; st-qdrant-memory's have none."
    )
    points_without_source: int = Field(description="Points written by st-qdrant-memory.")
    conversations: int
    buffered_messages: int
    last_write: int | None = Field(description="Unix ms of the last chunk written.")
    recall: Literal["hybrid", "dense"] | None = Field(
        None, description="How /retrieve recalls this agent now (dense where BM25 is missing)."
    )
    bm25: bool | None = Field(None, description="Whether the collection has BM25 terms.")
    points_without_bm25: int | None = Field(
        None, description="Points the background backfill has not given BM25 terms yet."
    )
    quarantined: list[QuarantinedConversation] = Field(
        default_factory=list,
        description="Its conversations set aside by a failure retrying cannot fix, with why.",
    )


# st-qdrant-memory's points, as its "Delete All" takes them (api/qdrant/collections.py)
WITHOUT_SOURCE = Filter(must=(IsEmpty(SOURCE),))


def _stats(runtime: Runtime, agent: AgentConfig) -> StatsResponse:
    collection = agent.collection_name
    total = runtime.store.count(collection)
    by_source = runtime.store.facet_counts(collection, "source")
    conversations = runtime.buffers.conversations_of(collection)
    last: Any = runtime.redis.hget(keys.agent_stats(collection), "last_write")
    held = runtime.quarantine.entries(runtime.quarantine.members(collection))
    quarantined = [QuarantinedConversation.model_validate(e, from_attributes=True) for e in held]
    return StatsResponse(
        collection=collection,
        points=total,
        points_by_source=by_source,
        # counted, not the total less the facets: a `source` that is a list (any Qdrant client
        # may write one) is in one facet per value
        points_without_source=runtime.store.count(collection, WITHOUT_SOURCE),
        conversations=len(conversations),
        buffered_messages=runtime.buffers.buffered_messages(conversations),
        last_write=int(last) if last else None,
        **_lexical(runtime, agent),
        quarantined=quarantined,
    )


def _lexical(runtime: Runtime, agent: AgentConfig) -> dict[str, Any]:
    state = runtime.store.collection(agent.collection_name)
    return {} if state is None else lexical_state(runtime, agent.name, state)


@router.get("/stats", response_model=StatsResponse, responses=AGENT_ACCESS)
async def stats(agent: AgentDep, runtime: RuntimeDep, run: AgentCallsDep) -> StatsResponse:
    """Points by source, buffered messages and the last write."""
    return await run(_stats, runtime, agent)


@router.post("/delete", response_model=DeleteResponse, responses=AGENT_ACCESS)
async def delete_scope(
    body: DeleteRequest, agent: AgentDep, runtime: RuntimeDep, run: AgentCallsDep
) -> DeleteResponse:
    """Delete one scope of the agent's memory; deleted message ids are never stored again."""
    scope = DeleteScope(**body.model_dump())
    return DeleteResponse.of(await run(delete, runtime, agent, scope))


@router.post(
    "/known-ids",
    response_model=KnownIdsResponse,
    response_model_exclude_none=True,
    responses=AGENT_ACCESS,
)
async def known(
    body: KnownIdsRequest, agent: AgentDep, runtime: RuntimeDep, run: AgentCallsDep
) -> KnownIdsResponse:
    """Which of these message ids the collection holds (memory-pool's or st-qdrant-memory's);
    with a source, also the fingerprints of the texts that source's chunks hold for them."""
    found = await run(
        known_messages, runtime.store, agent.collection_name, body.message_ids, body.source
    )
    fingerprints = None if body.source is None else dict(sorted(found.fingerprints.items()))
    return KnownIdsResponse(known=sorted(found.ids), fingerprints=fingerprints)

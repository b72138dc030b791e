"""Bodies of the memory viewer's endpoints: chunks as a person reads them, previews, counts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from api.schemas import AGENT_ACCESS, error_docs
from shared.format import fields
from shared.format.payload import messages_of, utc_date
from shared.format.timestamps import MAX_STORABLE_MS
from shared.store.memory_query import timestamp_of

ST_EXTENSION = "sillytavern (extension)"  # how people know the points without a `source`

BROWSE_ERRORS = AGENT_ACCESS | error_docs(
    e400="An agent name no collection can have, or a cursor this API did not give out.",
    e422="A filter, a page size or a date out of range.",
    e503="Qdrant is unavailable.",
)
POINT_ERRORS = AGENT_ACCESS | error_docs(
    e404="Unknown agent, or no such point in the agent's collection.",
    e422="A point id that is neither a UUID nor an unsigned integer.",
    e503="Qdrant or Redis is unavailable, or a dead-letter replay is running.",
)


class MemoryMessage(BaseModel):
    """One message of a chunk, as the point keeps it (`chunkMessages`)."""

    id: str = Field(description="The platform message id: PATCH /agents/{bot}/messages/{id}.")
    speaker: str
    ts: int = Field(description="Unix ms.")
    text: str
    user_id: str | None = Field(description="The person's id; None for the agent's own.")
    is_self: bool = Field(description="Said by the agent itself.")


class Memory(BaseModel):
    """One stored chunk, as memory-pool or st-qdrant-memory wrote it."""

    id: str = Field(description="The point id.")
    source: str | None = Field(description="The interface that wrote it; None: st-qdrant-memory.")
    writer: str = Field(description=f'The source, or "{ST_EXTENSION}" for st-qdrant-memory.')
    timestamp: int | None = Field(description="Unix ms of its oldest message.")
    date: str | None = Field(description="That time's UTC date, YYYY-MM-DD.")
    speakers: list[str]
    text: str
    message_ids: list[str] = Field(description="The platform message ids it holds, in order.")
    user_ids: list[str]
    channel_id: str | None = None
    guild_id: str | None = None
    conversation_id: str | None = None
    payload: dict[str, Any] = Field(description="The payload exactly as stored.")
    messages: list[MemoryMessage] | None = Field(
        None,
        description="Its messages in text order, each editable with PATCH "
        "/agents/{bot}/messages/{id}; None when the point does not keep them (written before "
        "edits were kept, or by st-qdrant-memory): it cannot be edited.",
    )


class MemoryPage(BaseModel):
    memories: list[Memory] = Field(description="Newest first (by timestamp, then point id).")
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; None on the last page."
    )


class DeletePreviewResponse(BaseModel):
    points: int = Field(description="Points the delete would remove from the collection now.")
    message_ids: int = Field(description="Distinct message ids those points hold.")
    points_without_source: int = Field(
        description="Of them, st-qdrant-memory's: it may write them again (it writes to Qdrant "
        "itself, and memory-pool's tombstones cannot stop it)."
    )
    points_rewritten: int = Field(
        0, description="Points the delete would write again without the deleted messages."
    )


class DayCount(BaseModel):
    date: str = Field(description="UTC date, YYYY-MM-DD.")
    by_source: dict[str, int]
    without_source: int = Field(description="st-qdrant-memory's chunks that day.")


class Timeline(BaseModel):
    days: list[DayCount] = Field(description="Oldest first, today (UTC) last.")


class AgentEntry(BaseModel):
    name: str
    collection: str
    listed: bool = Field(description="In the agents file (else: seen storing messages).")
    blocked: str | None = Field(None, description="Why writes are held, if they are.")


class AgentList(BaseModel):
    agents: list[AgentEntry] = Field(description="The agents this request's key may reach.")
    keys_configured: bool = Field(description="API keys exist: some agents may need one.")


def _ids(value: Any) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def memory_view(point_id: str, payload: Mapping[str, Any]) -> Memory:
    """A point for a person: the fields both writers use, st's comma-joined ones split."""
    stamp = timestamp_of(payload)
    source = _text(payload.get(fields.SOURCE))
    ids = _ids(payload.get(fields.MESSAGE_ID_LIST))
    if not ids:
        ids = [i.strip() for i in str(payload.get(fields.MESSAGE_IDS, "")).split(",") if i.strip()]
    speakers = [s.strip() for s in str(payload.get(fields.SPEAKERS, "")).split(",") if s.strip()]
    return Memory(
        id=point_id,
        source=source,
        writer=source if source is not None else ST_EXTENSION,
        timestamp=stamp,
        date=utc_date(stamp) if stamp is not None and 0 <= stamp <= MAX_STORABLE_MS else None,
        speakers=speakers,
        text=str(payload.get(fields.TEXT, "")),
        message_ids=ids,
        user_ids=_ids(payload.get(fields.USER_ID_LIST)),
        channel_id=_text(payload.get(fields.CHANNEL_ID)),
        guild_id=_text(payload.get(fields.GUILD_ID)),
        conversation_id=_text(payload.get(fields.CONVERSATION_ID)),
        payload=dict(payload),
        messages=_messages(payload),
    )


def _messages(payload: Mapping[str, Any]) -> list[MemoryMessage] | None:
    found = messages_of(payload)
    if found is None:
        return None
    return [
        MemoryMessage(
            id=m.id, speaker=m.speaker, ts=m.ts, text=m.text, user_id=m.user_id, is_self=m.is_self
        )
        for m in found
    ]

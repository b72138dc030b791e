"""The storage format (Format.md): a chunk's text and its point's payload, and reading the
message ids a payload holds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from shared.format import fields
from shared.format.messages import Message
from shared.format.timestamps import MAX_STORABLE_MS, MIN_STORABLE_MS


@dataclass(frozen=True, slots=True)
class ChunkContext:
    """Where a chunk's conversation happened; optional fields are left out of the payload."""

    source: str
    channel_id: str | None = None
    guild_id: str | None = None
    conversation_id: str | None = None


def in_text_order(messages: Iterable[Message]) -> list[Message]:
    """Messages sorted by timestamp; Python's sort is stable, so ties keep arrival order."""
    return sorted(messages, key=lambda message: message.ts)


def utc_date(ts_ms: int) -> str:
    """The `YYYY-MM-DD` UTC date of a Unix-ms timestamp."""
    return datetime.fromtimestamp(ts_ms / 1000, tz=UTC).strftime("%Y-%m-%d")


def chunk_text(messages: Sequence[Message]) -> str:
    """`[YYYY-MM-DD]` of the oldest message, a `Speaker: text` line each, no final newline."""
    ordered = in_text_order(messages)
    lines = [f"[{utc_date(ordered[0].ts)}]"]
    lines.extend(f"{message.speaker}: {message.text}" for message in ordered)
    return "\n".join(lines)


def _distinct(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def chunk_payload(messages: Sequence[Message], context: ChunkContext) -> dict[str, Any]:
    """The point payload: st-qdrant-memory's fields, then the ones only memory-pool reads."""
    ordered = in_text_order(messages)
    ids = [message.id for message in ordered]
    payload: dict[str, Any] = {
        fields.TEXT: chunk_text(ordered),
        fields.SPEAKERS: ", ".join(_distinct(message.speaker for message in ordered)),
        fields.MESSAGE_COUNT: len(ordered),
        fields.TIMESTAMP: ordered[0].ts,
        fields.MESSAGE_IDS: ",".join(ids),
        fields.IS_CHUNK: True,
        fields.SOURCE: context.source,
        # A comma-joined string cannot be matched reliably in Qdrant (clients.md §6): the list
        # is what memory-pool filters and deletes by.
        fields.MESSAGE_ID_LIST: ids,
        fields.USER_ID_LIST: _distinct(m.user_id for m in ordered if m.user_id is not None),
        fields.CHUNK_MESSAGES: [_message_record(message) for message in ordered],
    }
    optional = {
        fields.CHANNEL_ID: context.channel_id,
        fields.GUILD_ID: context.guild_id,
        fields.CONVERSATION_ID: context.conversation_id,
    }
    payload.update({key: value for key, value in optional.items() if value is not None})
    return payload


def _message_record(message: Message) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": message.id, "speaker": message.speaker, "ts": message.ts, "text": message.text,
    }  # fmt: skip
    if message.user_id is not None:
        record["userId"] = message.user_id
    if message.is_self:
        record["self"] = True
    return record


def messages_of(payload: Mapping[str, Any]) -> list[Message] | None:
    """The messages a point's chunk was made of, from `chunkMessages`; None when the point has
    none that can be read (older points, st-qdrant-memory's): it cannot be rebuilt."""
    records = payload.get(fields.CHUNK_MESSAGES)
    if not isinstance(records, list) or not records:
        return None
    try:
        return [_message_from(record) for record in records]
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _message_from(record: Mapping[str, Any]) -> Message:
    user_id = record.get("userId")
    ts = int(record["ts"])
    if not MIN_STORABLE_MS <= ts <= MAX_STORABLE_MS:
        # any Qdrant client may write `chunkMessages`: a time no chunk date can show is unreadable
        raise ValueError(f"message time {ts} is outside the years memory-pool stores")
    return Message(
        id=str(record["id"]),
        text=str(record["text"]),
        ts=ts,
        speaker=str(record["speaker"]),
        user_id=str(user_id) if user_id is not None else None,
        is_self=bool(record.get("self")),
    )


def context_of(payload: Mapping[str, Any]) -> ChunkContext:
    """Where a stored chunk's conversation happened, as its payload says."""

    def optional(key: str) -> str | None:
        value = payload.get(key)
        return str(value) if value is not None else None

    return ChunkContext(
        source=str(payload.get(fields.SOURCE, "")),
        channel_id=optional(fields.CHANNEL_ID),
        guild_id=optional(fields.GUILD_ID),
        conversation_id=optional(fields.CONVERSATION_ID),
    )


def message_ids_of(payload: Mapping[str, Any]) -> set[str]:
    """Every message id a point holds: memory-pool's list and the comma-joined `messageIds`."""
    ids = {part.strip() for part in str(payload.get(fields.MESSAGE_IDS, "")).split(",")}
    listed = payload.get(fields.MESSAGE_ID_LIST)
    if isinstance(listed, list):
        ids.update(str(item) for item in listed)
    ids.discard("")
    return ids

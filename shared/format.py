"""The storage format (Format.md): chunk text, point payload and the recall block."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from shared import fields
from shared.messages import Message

RECALL_HEADER = "\n[Past chat memories]\n\n"


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
    }
    optional = {
        fields.CHANNEL_ID: context.channel_id,
        fields.GUILD_ID: context.guild_id,
        fields.CONVERSATION_ID: context.conversation_id,
    }
    payload.update({key: value for key, value in optional.items() if value is not None})
    return payload


def js_to_fixed_0(value: float) -> str:
    """JavaScript's `Number.prototype.toFixed(0)`: exact binary value, halves away from zero."""
    sign = "-" if value < 0 else ""
    # Decimal(value) is the double's exact value, as toFixed sees it (0.285*100 is just below 28.5).
    rounded = Decimal(abs(value)).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    return f"{sign}{int(rounded)}"


def score_percent(score: float) -> str:
    """A hit's score as st-qdrant-memory prints it: `(score * 100).toFixed(0)`."""
    return js_to_fixed_0(score * 100)


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One point returned by recall: its id, cosine score and payload as stored; a hybrid
    recall adds the fused score it ranked by."""

    id: str
    score: float
    payload: Mapping[str, Any]
    fused_score: float | None = None


def describe_hit(payload: Mapping[str, Any], legacy_user_label: str) -> str:
    """The part before the quoted text: a chunk's speakers, or an old single-message point's."""
    if payload.get("isChunk") or "speakers" in payload:
        return f"Conversation ({payload.get('speakers', '')})"
    # Points from st-qdrant-memory before it chunked hold one message and a `speaker` role.
    if payload.get("speaker") == "user":
        return f"{legacy_user_label} said"
    return "Character said"


def format_hit(hit: RecallHit, legacy_user_label: str) -> str:
    text = str(hit.payload.get("text", "")).replace("\n", " ")
    head = describe_hit(hit.payload, legacy_user_label)
    return f'• {head}: "{text}" (score: {score_percent(hit.score)}%)\n\n'


def recall_block(hits: Sequence[RecallHit], legacy_user_label: str = "User") -> str:
    """st-qdrant-memory's injected block, byte for byte; "" when nothing qualifies."""
    if not hits:
        return ""
    return RECALL_HEADER + "".join(format_hit(hit, legacy_user_label) for hit in hits)

"""What the MCP tools answer (their output schemas), made from the HTTP API's answers; and the
few things the tools work out before calling it: a time filter, a remembered message's id."""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextlib import suppress
from typing import Any, Literal

from pydantic import BaseModel, Field

from api.mcp.backend import ToolFailure
from api.memory_schemas import AgentEntry
from shared.format import fields
from shared.format.fingerprint import text_fingerprint
from shared.format.ids import clean_text
from shared.format.payload import utc_date
from shared.format.timestamps import MAX_STORABLE_MS, from_iso

# What `remember` stores its messages under: their dedupe key is (agent, source, message id).
MCP_SOURCE = "mcp"
CHOSEN_ID_PREFIX = "mcp-"

Outcome = Literal["stored", "duplicate", "skipped", "edited", "stale"]
# /save's count for each outcome of one message, in the order they are looked at
COUNTED: tuple[tuple[Outcome, str], ...] = (
    ("stored", "accepted"),
    ("duplicate", "duplicates"),
    ("skipped", "skipped"),
    ("edited", "edited"),
    ("stale", "stale"),
)


class RecalledMemory(BaseModel):
    """One recalled chunk: a stretch of conversation, or one remembered note."""

    text: str = Field(description="Its text: `[YYYY-MM-DD]`, then a `Speaker: text` line each.")
    date: str | None = Field(description="UTC date of its oldest message, YYYY-MM-DD.")
    timestamp: int | None = Field(description="Unix ms of its oldest message.")
    speakers: list[str] = Field(description="Who speaks in it, in order of first line.")
    source: str | None = Field(description='The interface that wrote it ("discord", "mcp", …).')
    channel_id: str | None = None
    conversation_id: str | None = None
    message_ids: list[str] = Field(description="Its messages' ids (forget takes one).")
    score: float = Field(description="Cosine similarity to the query.")


class RecallResult(BaseModel):
    agent: str
    formatted: str = Field(
        description="The recall block, ready to put in a prompt; empty when nothing qualifies."
    )
    hits: list[RecalledMemory] = Field(description="The memories, best first.")


class RememberResult(BaseModel):
    agent: str
    message_id: str = Field(description="The id it is stored under (forget takes it).")
    message_id_chosen: bool = Field(
        description="No message_id was given: this one was derived from the text, speaker and "
        "conversation, so remembering the same thing again is a duplicate."
    )
    outcome: Outcome = Field(
        description="stored: kept (recallable once its chunk is written, within seconds to "
        "minutes); duplicate: this message id was already seen (or forgotten); skipped: too "
        "short to keep; edited: a seen id with another text, which replaces it; stale: an "
        "edit of a memory that cannot be rebuilt, which keeps its text."
    )


class ForgetResult(BaseModel):
    agent: str
    deleted_points: int = Field(description="Stored chunks that went.")
    rewritten_points: int = Field(description="Chunks written again without the forgotten part.")
    deleted_buffered: int = Field(description="Messages that went before being stored.")
    deleted_dead_letters: int


class AgentsResult(BaseModel):
    agents: list[AgentEntry] = Field(description="The agents this caller may reach.")
    default_agent: str | None = Field(
        description="The agent a tool call without `agent` is for; None: name one."
    )


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _timestamp(payload: Mapping[str, Any]) -> int | None:
    value = payload.get(fields.TIMESTAMP)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if 0 <= value <= MAX_STORABLE_MS else None


def _message_ids(payload: Mapping[str, Any]) -> list[str]:
    listed = payload.get(fields.MESSAGE_ID_LIST)
    if isinstance(listed, list) and listed:
        return [str(item) for item in listed]
    joined = str(payload.get(fields.MESSAGE_IDS, ""))
    return [item.strip() for item in joined.split(",") if item.strip()]


def _speakers(payload: Mapping[str, Any]) -> list[str]:
    joined = payload.get(fields.SPEAKERS)
    if joined is None:  # st-qdrant-memory's single-message points: a role
        return [str(payload["speaker"])] if payload.get("speaker") else []
    return [name.strip() for name in str(joined).split(",") if name.strip()]


def recalled(hit: Mapping[str, Any]) -> RecalledMemory:
    """A /retrieve hit ({id, score, payload}) as a model reads it."""
    payload: Mapping[str, Any] = hit.get("payload") or {}
    stamp = _timestamp(payload)
    return RecalledMemory(
        text=str(payload.get(fields.TEXT, "")),
        date=None if stamp is None else utc_date(stamp),
        timestamp=stamp,
        speakers=_speakers(payload),
        source=_text(payload.get(fields.SOURCE)),
        channel_id=_text(payload.get(fields.CHANNEL_ID)),
        conversation_id=_text(payload.get(fields.CONVERSATION_ID)),
        message_ids=_message_ids(payload),
        score=float(hit.get("score", 0.0)),
    )


def time_filter(name: str, value: int | str | None) -> int | None:
    """`since` / `until` as /retrieve takes them (Unix ms) from Unix ms or ISO 8601 (a date, or
    a date and time; UTC without an offset). Whether it is in range is the API's to say."""
    if value is None or isinstance(value, int):
        return value
    text = value.strip()
    found: int | None = None
    if re.fullmatch(r"-?[0-9]+", text):  # not str.isdigit: "²" and "--5" pass it, int() fails
        with suppress(ValueError):  # over 4,300 digits: int() refuses, and it is no time
            found = int(text)
    else:
        found = from_iso(text)
    if found is None:
        raise ToolFailure(
            "invalid_request",
            f"{name}: {value[:40]!r} is neither an ISO 8601 date (2026-05-01, "
            "2026-05-01T18:00:00Z) nor Unix milliseconds",
        )
    return found


def chosen_message_id(text: str, speaker: str | None, conversation_id: str | None) -> str:
    """A remembered message's id when none is given: "mcp-" and 16 hex digits of the BLAKE2b of
    its text as stored (cleaned, trimmed), its speaker and its conversation. Stable, so a model
    that remembers the same thing twice stores it once."""
    key = "\x1f".join((clean_text(text).strip(), speaker or "", conversation_id or ""))
    return CHOSEN_ID_PREFIX + text_fingerprint(key)


def outcome(counts: Mapping[str, Any]) -> Outcome:
    """The one message's fate from /save's counts (refusals are the caller's to raise)."""
    for name, key in COUNTED:
        if counts.get(key):
            return name
    return "duplicate"  # nothing counted: a message the save took no new notice of

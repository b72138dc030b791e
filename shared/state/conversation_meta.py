"""The conversation hash (keys.meta): its field names, their types and defaults, in one place.

Python reads it through ConversationMeta; only the Lua scripts (shared/state/scripts/, and the
delete, quarantine and backlog scripts) name the fields themselves.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass


class Field(enum.StrEnum):
    """Every field of a conversation hash."""

    AGENT = "agent"  # the agent's name as the first save spelled it
    SOURCE = "source"  # discord, sillytavern, ...
    CID = "cid"  # conversation id (imports, clients without channels)
    CHANNEL = "channel"
    GUILD = "guild"
    NOIDLE = "noidle"  # "1": an import, no idle timer of its own
    LAST = "last"  # ms of the last save that stored something
    NEWEST = "newest"  # ms timestamp of the newest buffered message
    CHARS = "chars"  # chunker size of the buffered messages
    WRITTEN = "written"  # how many buffered messages are stored as the open chunk
    INFLIGHT = "inflight"  # JSON list of point ids a flush wrote without committing
    # the first message id of a written open chunk an edit took that message out of: its point
    # (whose id came from it) is deleted by the next flush, which writes the chunk anew
    RETIRE = "retire"
    # the first message id of the last open chunk written (its point's id came from it): that
    # point may stay stored after an edit or a delete set `written` to 0, until the next flush
    # rewrites it, and is retired if the message leaves (only the Lua scripts read it)
    HEAD = "head"
    GEN = "gen"  # bumped by every delete that touches the conversation
    FORCE = "force"  # pending force-flush requests
    ATTEMPTS = "attempts"  # failed flush attempts (back-off)
    RETRY_AT = "retry_at"  # ms before which a save must not make it due again
    FAILURES = "failures"  # failures counted towards quarantine
    QUARANTINED = "quarantined"  # the reason it is quarantined (absent: it is not)
    QUARANTINED_AT = "quarantined_at"  # ms


@dataclass(frozen=True, slots=True)
class ConversationMeta:
    """A conversation hash as read, typed, with its defaults for absent fields."""

    agent: str = ""
    source: str = ""
    conversation_id: str | None = None
    channel_id: str | None = None
    guild_id: str | None = None
    idle_timer: bool = True
    last_ms: int = 0
    written: int = 0
    inflight: tuple[str, ...] = ()
    retire: str | None = None
    generation: str = "0"
    force: int = 0
    attempts: int = 0
    failures: int = 0

    @classmethod
    def of(cls, raw: Mapping[str, str]) -> ConversationMeta:
        try:
            return cls._parsed(raw)
        except (ValueError, TypeError) as exc:
            raise UnreadableConversation(raw, exc) from exc

    @classmethod
    def _parsed(cls, raw: Mapping[str, str]) -> ConversationMeta:
        inflight = raw.get(Field.INFLIGHT)
        return cls(
            agent=raw.get(Field.AGENT, ""),
            source=raw.get(Field.SOURCE, ""),
            conversation_id=raw.get(Field.CID) or None,
            channel_id=raw.get(Field.CHANNEL) or None,
            guild_id=raw.get(Field.GUILD) or None,
            idle_timer=raw.get(Field.NOIDLE) != "1",
            last_ms=int(raw.get(Field.LAST) or 0),
            written=int(raw.get(Field.WRITTEN) or 0),
            inflight=tuple(json.loads(inflight)) if inflight else (),
            retire=raw.get(Field.RETIRE) or None,
            generation=raw.get(Field.GEN, "0"),
            force=int(raw.get(Field.FORCE) or 0),
            attempts=int(raw.get(Field.ATTEMPTS) or 0),
            failures=int(raw.get(Field.FAILURES) or 0),
        )


class UnreadableConversation(ValueError):
    """A conversation hash with a field that does not parse: it fails the same way on every
    try. `known` holds what needs no parsing (the agent, the generation), to name it."""

    def __init__(self, raw: Mapping[str, str], error: Exception) -> None:
        super().__init__(f"a field of the conversation hash cannot be read: {error}")
        self.known = ConversationMeta(
            agent=raw.get(Field.AGENT, ""), generation=raw.get(Field.GEN, "0")
        )

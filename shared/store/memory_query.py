"""Browsing an agent's chunks: the filters, the keyset cursor and the page order, as pure rules."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.errors import InvalidInput
from shared.format.fields import (
    CHANNEL_ID,
    CONVERSATION_ID,
    GUILD_ID,
    SOURCE,
    TIMESTAMP,
    USER_ID_LIST,
)
from shared.store.filters import Condition, Filter, Match, Range

MAX_POINT_INT = 2**64 - 1  # Qdrant's integer ids are unsigned 64-bit
CURSOR_STAMP = re.compile(r"-?[0-9]{1,19}")
# What Qdrant's integer index orders: signed 64-bit (a client may write nanoseconds, 19 digits)
MIN_STAMP, MAX_STAMP = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True)
class MemoryFilters:
    """Optional narrowing of a browse; None means any. Times are Unix ms, inclusive."""

    source: str | None = None
    channel_id: str | None = None
    guild_id: str | None = None
    conversation_id: str | None = None
    user_id: str | None = None
    since: int | None = None
    until: int | None = None


@dataclass(frozen=True, slots=True, order=True)
class Cursor:
    """The last chunk of a page: the next page starts strictly after it, newest first.

    Qdrant's ordered scroll has no next-page offset, and many chunks may share a timestamp,
    so the position is the pair (timestamp, point id), compared in that order."""

    timestamp: int
    point_id: str

    def encode(self) -> str:
        return f"{self.timestamp}_{self.point_id}"

    @classmethod
    def decode(cls, raw: str) -> Cursor:
        stamp, _, point = raw.partition("_")
        normal = normal_point_id(point)
        # ASCII digits only ("²".isdigit() is true) and within Qdrant's 64-bit integers
        if (
            not CURSOR_STAMP.fullmatch(stamp)
            or not MIN_STAMP <= int(stamp) <= MAX_STAMP
            or normal is None
        ):
            raise InvalidInput(f"cursor {raw[:80]!r} is not one this API gave out")
        return cls(int(stamp), normal)


def normal_point_id(raw: str) -> str | None:
    """A point id as Qdrant writes it (a UUID in canonical form, or an unsigned integer);
    None for anything else, which can name no point."""
    if raw.isdigit() and raw.isascii():
        return raw if int(raw) <= MAX_POINT_INT else None
    try:
        return str(uuid.UUID(raw))
    except ValueError:
        return None


def qdrant_id(point_id: str) -> int | str:
    """The id as qdrant-client takes it: integer ids are numbers."""
    return int(point_id) if point_id.isdigit() else point_id


def memory_filter(filters: MemoryFilters) -> list[Condition]:
    """The conditions the store applies itself, all of which must hold."""
    must: list[Condition] = [
        Match(key, value)
        for key, value in (
            (SOURCE, filters.source),
            (CHANNEL_ID, filters.channel_id),
            (GUILD_ID, filters.guild_id),
            (CONVERSATION_ID, filters.conversation_id),
            (USER_ID_LIST, filters.user_id),
        )
        if value is not None
    ]
    if filters.since is not None or filters.until is not None:
        must.append(time_range(gte=filters.since, lte=filters.until))
    return must


def time_range(**bounds: int | None) -> Range:
    return Range(TIMESTAMP, **bounds)


def with_conditions(must: list[Condition], *extra: Condition) -> Filter | None:
    conditions = (*must, *extra)
    return Filter(must=conditions) if conditions else None


def timestamp_of(payload: Mapping[str, Any]) -> int | None:
    """A chunk's timestamp as the ordered scroll sees it; None when it has none to order by."""
    value = payload.get(TIMESTAMP)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def id_order(point_id: str) -> tuple[int, int | str]:
    """One total order over both kinds of ids (integers before UUIDs), for ties."""
    return (0, int(point_id)) if point_id.isdigit() else (1, point_id)


def newest_first(points: Iterable[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict]]:
    """Descending (timestamp, id): the page order, which a cursor continues."""
    dated = [(p, timestamp_of(p[1])) for p in points]
    dated = [(p, ts) for p, ts in dated if ts is not None]
    dated.sort(key=lambda item: (item[1], id_order(item[0][0])), reverse=True)
    return [p for p, _ in dated]


def before(cursor: Cursor | None, point_id: str, payload: Mapping[str, Any]) -> bool:
    """Whether a chunk comes after the cursor in the page order."""
    if cursor is None:
        return True
    stamp = timestamp_of(payload)
    if stamp is None:
        return False
    return (stamp, id_order(point_id)) < (cursor.timestamp, id_order(cursor.point_id))

"""The store filter of a recall, as a pure function of the request's filters and exclusions."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from shared.format.fields import CHANNEL_ID, GUILD_ID, MESSAGE_ID_LIST, SOURCE, TIMESTAMP
from shared.store.filters import Condition, Filter, Match, MatchAny, Range


@dataclass(frozen=True, slots=True)
class RecallFilters:
    """Optional narrowing of a recall; None means any."""

    source: str | None = None
    channel_id: str | None = None
    guild_id: str | None = None
    since: int | None = None  # Unix ms, inclusive
    until: int | None = None  # Unix ms, inclusive


def recall_filter(filters: RecallFilters, excluded_ids: Collection[str]) -> Filter | None:
    """Conditions the store can apply itself.

    Excluded ids are also left out in the store through `messageIdList`, which saves
    over-fetching for memory-pool's own chunks; st-qdrant-memory's chunks only have the
    comma-joined `messageIds`, so the caller still checks every hit (recall_rules).
    """
    must: list[Condition] = [
        Match(field, value)
        for field, value in (
            (SOURCE, filters.source),
            (CHANNEL_ID, filters.channel_id),
            (GUILD_ID, filters.guild_id),
        )
        if value is not None
    ]
    if filters.since is not None or filters.until is not None:
        must.append(Range(TIMESTAMP, gte=filters.since, lte=filters.until))
    must_not: list[Condition] = []
    if excluded_ids:
        must_not.append(MatchAny(MESSAGE_ID_LIST, tuple(sorted(excluded_ids))))
    if not must and not must_not:
        return None
    return Filter(must=tuple(must), must_not=tuple(must_not))

"""The Qdrant filter of a recall, as a pure function of the request's filters and exclusions."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from qdrant_client import models


@dataclass(frozen=True, slots=True)
class RecallFilters:
    """Optional narrowing of a recall; None means any."""

    source: str | None = None
    channel_id: str | None = None
    guild_id: str | None = None
    since: int | None = None  # Unix ms, inclusive
    until: int | None = None  # Unix ms, inclusive


def recall_filter(filters: RecallFilters, excluded_ids: Collection[str]) -> models.Filter | None:
    """Conditions Qdrant can apply itself.

    Excluded ids are also left out server-side through `messageIdList`, which saves
    over-fetching for memory-pool's own chunks; st-qdrant-memory's chunks only have the
    comma-joined `messageIds`, so the caller still checks every hit (recall_rules).
    """
    must: list[models.Condition] = []
    for field, value in (
        ("source", filters.source),
        ("channelId", filters.channel_id),
        ("guildId", filters.guild_id),
    ):
        if value is not None:
            must.append(models.FieldCondition(key=field, match=models.MatchValue(value=value)))
    if filters.since is not None or filters.until is not None:
        must.append(
            models.FieldCondition(
                key="timestamp", range=models.Range(gte=filters.since, lte=filters.until)
            )
        )
    must_not: list[models.Condition] = []
    if excluded_ids:
        must_not.append(
            models.FieldCondition(
                key="messageIdList", match=models.MatchAny(any=sorted(excluded_ids))
            )
        )
    if not must and not must_not:
        return None
    return models.Filter(must=must or None, must_not=must_not or None)

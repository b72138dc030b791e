"""Neutral filters (shared/store/filters.py) as qdrant-client's models."""

from __future__ import annotations

from qdrant_client import models

from shared.store import filters as neutral
from shared.store.memory_query import qdrant_id


def to_qdrant(flt: neutral.Filter | None) -> models.Filter | None:
    return neutral.translate(
        flt, condition, lambda must, must_not: models.Filter(must=must, must_not=must_not)
    )


def condition(c: neutral.Condition) -> models.Condition:
    match c:
        case neutral.Match(field, value):
            return models.FieldCondition(key=field, match=models.MatchValue(value=value))
        case neutral.MatchAny(field, values):
            return models.FieldCondition(key=field, match=models.MatchAny(any=list(values)))
        case neutral.Range(field, gte, gt, lte, lt):
            return models.FieldCondition(
                key=field, range=models.Range(gte=gte, gt=gt, lte=lte, lt=lt)
            )
        case neutral.HasIds(ids):
            return models.HasIdCondition(has_id=[qdrant_id(i) for i in ids])
        case neutral.IsEmpty(field):
            return models.IsEmptyCondition(is_empty=models.PayloadField(key=field))
        case neutral.HasVector(name):
            return models.HasVectorCondition(has_vector=name)
    raise TypeError(f"not a filter condition: {c!r}")

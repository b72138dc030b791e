"""Neutral filters (shared/filters.py) as qdrant-client's models."""

from __future__ import annotations

from qdrant_client import models

from shared.filters import Condition, Filter, HasIds, HasVector, IsEmpty, Match, MatchAny, Range
from shared.memory_query import qdrant_id


def to_qdrant(flt: Filter | None) -> models.Filter | None:
    if flt is None:
        return None
    must = [condition(c) for c in flt.must]
    must_not = [condition(c) for c in flt.must_not]
    return models.Filter(must=must or None, must_not=must_not or None)


def condition(c: Condition) -> models.Condition:
    match c:
        case Match(field, value):
            return models.FieldCondition(key=field, match=models.MatchValue(value=value))
        case MatchAny(field, values):
            return models.FieldCondition(key=field, match=models.MatchAny(any=list(values)))
        case Range(field, gte, gt, lte, lt):
            return models.FieldCondition(
                key=field, range=models.Range(gte=gte, gt=gt, lte=lte, lt=lt)
            )
        case HasIds(ids):
            return models.HasIdCondition(has_id=[qdrant_id(i) for i in ids])
        case IsEmpty(field):
            return models.IsEmptyCondition(is_empty=models.PayloadField(key=field))
        case HasVector(name):
            return models.HasVectorCondition(has_vector=name)
    raise TypeError(f"not a filter condition: {c!r}")

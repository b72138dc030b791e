"""Neutral filters (shared/filters.py) as Qdrant Edge's types."""

from __future__ import annotations

from typing import Any

import qdrant_edge as edge

from shared.filters import Condition, Filter, HasIds, HasVector, IsEmpty, Match, MatchAny, Range
from shared.memory_query import qdrant_id


def to_edge(flt: Filter | None) -> edge.Filter | None:
    if flt is None:
        return None
    must = [condition(c) for c in flt.must]
    must_not = [condition(c) for c in flt.must_not]
    return edge.Filter(must=must or None, must_not=must_not or None)


def condition(c: Condition) -> Any:
    match c:
        case Match(field, value):
            return edge.FieldCondition(field, match=edge.MatchValue(value))
        case MatchAny(field, values):
            return edge.FieldCondition(field, match=edge.MatchAny(list(values)))
        case Range(field, gte, gt, lte, lt):
            return edge.FieldCondition(
                field,
                range=edge.RangeFloat(
                    gte=_float(gte), gt=_float(gt), lte=_float(lte), lt=_float(lt)
                ),
            )
        case HasIds(ids):
            return edge.HasIdCondition({qdrant_id(i) for i in ids})
        case IsEmpty(field):
            return edge.IsEmptyCondition(field)
        case HasVector(name):
            return edge.HasVectorCondition(name)
    raise TypeError(f"not a filter condition: {c!r}")


def _float(bound: int | None) -> float | None:
    return None if bound is None else float(bound)

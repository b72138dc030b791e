"""Neutral filters (shared/store/filters.py) as Qdrant Edge's types."""

from __future__ import annotations

from typing import Any

import qdrant_edge as edge

from shared.store import filters as neutral
from shared.store.memory_query import qdrant_id


def to_edge(flt: neutral.Filter | None) -> edge.Filter | None:
    return neutral.translate(
        flt, condition, lambda must, must_not: edge.Filter(must=must, must_not=must_not)
    )


def condition(c: neutral.Condition) -> Any:
    match c:
        case neutral.Match(field, value):
            return edge.FieldCondition(field, match=edge.MatchValue(value))
        case neutral.MatchAny(field, values):
            return edge.FieldCondition(field, match=edge.MatchAny(list(values)))
        case neutral.Range(field, gte, gt, lte, lt):
            return edge.FieldCondition(
                field,
                range=edge.RangeFloat(
                    gte=_float(gte), gt=_float(gt), lte=_float(lte), lt=_float(lt)
                ),
            )
        case neutral.HasIds(ids):
            return edge.HasIdCondition({qdrant_id(i) for i in ids})
        case neutral.IsEmpty(field):
            return edge.IsEmptyCondition(field)
        case neutral.HasVector(name):
            return edge.HasVectorCondition(name)
    raise TypeError(f"not a filter condition: {c!r}")


def _float(bound: int | None) -> float | None:
    return None if bound is None else float(bound)

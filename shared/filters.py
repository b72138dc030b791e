"""Point filters as neutral data: what to select, said once; each Store implementation
(shared/store_qdrant.py, shared/store_edge.py) translates it to its own client's types."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Match:
    """The field equals the value (for a list field: holds it)."""

    field: str
    value: str | int | bool


@dataclass(frozen=True, slots=True)
class MatchAny:
    """The field equals (holds) any of the values."""

    field: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Range:
    """A numeric field within bounds; None is unbounded."""

    field: str
    gte: int | None = None
    gt: int | None = None
    lte: int | None = None
    lt: int | None = None


@dataclass(frozen=True, slots=True)
class HasIds:
    """The point's id is one of these (canonical ids: UUIDs, or unsigned integers as digits)."""

    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class IsEmpty:
    """The field is missing, null or an empty list."""

    field: str


@dataclass(frozen=True, slots=True)
class HasVector:
    """The point has the named vector."""

    name: str


Condition = Match | MatchAny | Range | HasIds | IsEmpty | HasVector


@dataclass(frozen=True, slots=True)
class Filter:
    """Every `must` holds and no `must_not` does; an empty filter selects every point."""

    must: tuple[Condition, ...] = ()
    must_not: tuple[Condition, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.must and not self.must_not


def all_of(conditions: Iterable[Condition]) -> Filter | None:
    """A filter of conditions that must all hold; None (any point) for none."""
    must = tuple(conditions)
    return Filter(must=must) if must else None


def has_ids(ids: Iterable[str]) -> Filter:
    return Filter(must=(HasIds(tuple(ids)),))

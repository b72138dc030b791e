"""Point filters as neutral data: what to select, said once; each Store implementation
(shared/store/qdrant/engine.py, shared/store/edge/engine.py) translates it to its own
client's types."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar


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
# an engine's condition and filter types
C = TypeVar("C")
F = TypeVar("F")


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


def translate(
    flt: Filter | None,
    condition: Callable[[Condition], C],
    build: Callable[[list[C] | None, list[C] | None], F],
) -> F | None:
    """A filter in an engine's types: each condition by `condition`, the whole by `build`,
    given None for an empty side (as both engines take it)."""
    if flt is None:
        return None
    must = [condition(c) for c in flt.must]
    must_not = [condition(c) for c in flt.must_not]
    return build(must or None, must_not or None)

"""Qdrant's REST filters as its clients send them (st-qdrant-memory: `{"must": [...]}` when
searching a shared collection, `{"should": [...]}` of `messageIds` text matches when indexing
old chats) read into what the engines take (neutral filters, shared/store/filters.py) and what
they are not given, checked here on each point's payload.

Conditions: a field's `match` (`value`, `any`, and `text` in `messageIds` only, where it means
"one of the comma-separated ids", as st-qdrant-memory means it: clients.md §6), `range`,
`is_empty`, `is_null`, `has_id`, `has_vector` (the engine's alone), and nested filters. Keys
name top-level payload fields. Anything else is refused (InvalidInput), never ignored.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.errors import InvalidInput
from shared.format.fields import MESSAGE_IDS
from shared.format.ids import replace_surrogates
from shared.store.filters import (
    Condition,
    Filter,
    HasIds,
    HasVector,
    IsEmpty,
    Match,
    MatchAny,
    Range,
)
from shared.store.memory_query import normal_point_id

# Bounds on what one request may ask: a filter is checked on every point a scan reads.
MAX_CONDITIONS = 1024
MAX_DEPTH = 8
MAX_VALUES = 10_000
# Qdrant's integer payload values are signed 64-bit.
MIN_INT, MAX_INT = -(2**63), 2**63 - 1
FILTER_KEYS = frozenset({"must", "should", "must_not"})
RANGE_KEYS = frozenset({"gt", "gte", "lt", "lte"})
MISSING = object()

# Whether a point (its id and the payload fields the test reads) passes.
Test = Callable[[str, Mapping[str, Any]], bool]


@dataclass(frozen=True, slots=True)
class Clause:
    """One condition: its test here (None when only the engine can tell: `has_vector`), its
    neutral form when an engine evaluates it exactly as Qdrant does, and the fields it reads."""

    test: Test | None
    neutral: Condition | None
    fields: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class RestFilter:
    """A filter split in two: `store` for the engine, `rest` for each point it returns (None:
    the engine's filter is the whole of it), and the payload fields `rest` reads."""

    store: Filter | None = None
    rest: Test | None = None
    fields: frozenset[str] = field(default_factory=frozenset)

    def matches(self, point_id: str, payload: Mapping[str, Any]) -> bool:
        return self.rest is None or self.rest(point_id, payload)


def read_filter(raw: Any) -> RestFilter:
    """A Qdrant REST filter (None: every point); raises InvalidInput for one it cannot take."""
    if raw is None:
        return RestFilter()
    must, should, must_not = _Reader().clauses(raw, "filter", depth=0)
    if len(should) == 1:  # one `should` condition must hold: it is a `must`
        must, should = [*must, *should], []
    store_must = [c.neutral for c in must if c.neutral is not None]
    store_not = [c.neutral for c in must_not if c.neutral is not None]
    rest_must = [c for c in must if c.neutral is None]
    rest_not = [c for c in must_not if c.neutral is None]
    flt = Filter(must=tuple(store_must), must_not=tuple(store_not))
    store = None if flt.empty else flt
    if not (rest_must or rest_not or should):
        return RestFilter(store)
    _need_tests(should, "filter.should")
    used = frozenset().union(*(c.fields for c in (*rest_must, *rest_not, *should)))
    return RestFilter(store, _combined(rest_must, should, rest_not), used)


def _need_tests(clauses: Sequence[Clause], where: str) -> None:
    if any(c.test is None for c in clauses):
        raise InvalidInput(f"{where}: has_vector is taken only in the top-level must and must_not")


def _combined(must: Sequence[Clause], should: Sequence[Clause], must_not: Sequence[Clause]) -> Test:
    musts = [c.test for c in must if c.test is not None]
    shoulds = [c.test for c in should if c.test is not None]
    nots = [c.test for c in must_not if c.test is not None]

    def test(point_id: str, payload: Mapping[str, Any]) -> bool:
        return (
            all(t(point_id, payload) for t in musts)
            and not any(t(point_id, payload) for t in nots)
            and (not shoulds or any(t(point_id, payload) for t in shoulds))
        )

    return test


class _Reader:
    """Reads one filter, counting its conditions."""

    def __init__(self) -> None:
        self.conditions = 0

    def clauses(
        self, raw: Any, where: str, *, depth: int
    ) -> tuple[list[Clause], list[Clause], list[Clause]]:
        if not isinstance(raw, dict):
            raise InvalidInput(f"{where}: a filter is an object of must, should and must_not")
        if depth > MAX_DEPTH:
            raise InvalidInput(f"{where}: filters nest {MAX_DEPTH} deep at most")
        unknown = sorted(set(raw) - FILTER_KEYS)
        if unknown:
            raise InvalidInput(f"{where}: {unknown[0]!r} is not taken here")
        found: dict[str, list[Clause]] = {}
        for key in ("must", "should", "must_not"):
            items = raw.get(key)
            listed = [] if items is None else [items] if isinstance(items, dict) else items
            if not isinstance(listed, list):
                raise InvalidInput(f"{where}.{key}: a condition or a list of conditions")
            found[key] = [
                self.condition(item, f"{where}.{key}[{i}]", depth) for i, item in enumerate(listed)
            ]
        return found["must"], found["should"], found["must_not"]

    def condition(self, raw: Any, where: str, depth: int) -> Clause:
        self.conditions += 1
        if self.conditions > MAX_CONDITIONS:
            raise InvalidInput(f"{where}: a filter holds {MAX_CONDITIONS} conditions at most")
        if not isinstance(raw, dict) or not raw:
            raise InvalidInput(f"{where}: a condition is a non-empty object")
        if "key" in raw:
            return _field_condition(raw, where)
        if set(raw) <= FILTER_KEYS:
            return self.nested(raw, where, depth + 1)
        if len(raw) == 1:
            ((kind, value),) = raw.items()
            reader = _SINGLE.get(kind)
            if reader is not None:
                return reader(value, f"{where}.{kind}")
        raise InvalidInput(f"{where}: {sorted(raw)[0]!r} is not a condition taken here")

    def nested(self, raw: dict[str, Any], where: str, depth: int) -> Clause:
        must, should, must_not = self.clauses(raw, where, depth=depth)
        every = (*must, *should, *must_not)
        _need_tests(every, where)
        used = frozenset().union(*(c.fields for c in every))
        return Clause(_combined(must, should, must_not), None, used)


# --- single conditions ----------------------------------------------------------------------


def _values(payload: Mapping[str, Any], key: str) -> list[Any]:
    """A field's values: each element of a list, else the value itself (none when absent)."""
    value = payload.get(key, MISSING)
    if value is MISSING:
        return []
    return value if isinstance(value, list) else [value]


def _same(stored: Any, wanted: str | int | bool) -> bool:
    """Qdrant's equality: a bool only equals a bool, an integer only an integer."""
    if isinstance(wanted, bool) or isinstance(stored, bool):
        return type(stored) is type(wanted) and stored == wanted
    if isinstance(wanted, int):
        return type(stored) is int and stored == wanted
    return isinstance(stored, str) and stored == wanted


def _text(value: str, where: str) -> str:
    """A string of a filter; one holding a lone surrogate (`\\ud800`: no UTF-8 carries it, a
    Qdrant server's JSON reader refuses it, no stored payload holds it) is refused here, not by
    each engine in its words."""
    if replace_surrogates(value) != value:
        raise InvalidInput(f"{where}: holds a lone surrogate (\\ud800), which is no Unicode text")
    return value


def _key(raw: dict[str, Any], where: str) -> str:
    key = raw["key"]
    if not isinstance(key, str) or not key or any(c in key for c in ".[]"):
        raise InvalidInput(f"{where}.key: the name of a top-level payload field")
    return _text(key, f"{where}.key")


def _field_condition(raw: dict[str, Any], where: str) -> Clause:
    key = _key(raw, where)
    kinds = set(raw) - {"key"}
    if kinds == {"match"}:
        return _match(key, raw["match"], f"{where}.match")
    if kinds == {"range"}:
        return _range(key, raw["range"], f"{where}.range")
    shown = ", ".join(sorted(kinds)) or "nothing"
    raise InvalidInput(f"{where}: a field condition takes one `match` or `range`, not {shown}")


def _match(key: str, raw: Any, where: str) -> Clause:
    if not isinstance(raw, dict) or len(raw) != 1:
        raise InvalidInput(f"{where}: one of value, any, text")
    ((kind, wanted),) = raw.items()
    if kind == "value":
        return _match_value(key, wanted, where)
    if kind == "any":
        return _match_any(key, wanted, where)
    if kind == "text":
        return _match_text(key, wanted, where)
    raise InvalidInput(f"{where}: match {kind!r} is not taken here (value, any, text)")


def _scalar(value: Any, where: str) -> str | int | bool:
    if isinstance(value, str):
        return _text(value, where)
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and MIN_INT <= value <= MAX_INT:
        return value
    raise InvalidInput(f"{where}: a string, a 64-bit integer or a bool")


def _match_value(key: str, wanted: Any, where: str) -> Clause:
    value = _scalar(wanted, f"{where}.value")
    # Qdrant Edge reads a bool as the integer 1 or 0: bools are matched here instead
    neutral = None if isinstance(value, bool) else Match(key, value)
    return Clause(
        lambda _, p: any(_same(v, value) for v in _values(p, key)), neutral, frozenset({key})
    )


def _match_any(key: str, wanted: Any, where: str) -> Clause:
    if not isinstance(wanted, list) or len(wanted) > MAX_VALUES:
        raise InvalidInput(f"{where}.any: a list of at most {MAX_VALUES} values")
    values = [_scalar(v, f"{where}.any") for v in wanted]
    if any(isinstance(v, bool) for v in values) or len({type(v) for v in values}) > 1:
        raise InvalidInput(f"{where}.any: all strings or all integers")
    texts = tuple(v for v in values if isinstance(v, str))
    neutral = MatchAny(key, texts) if texts and len(texts) == len(values) else None
    wanted_set = frozenset(values)
    kind = type(values[0]) if values else str

    def test(_: str, payload: Mapping[str, Any]) -> bool:
        return any(type(v) is kind and v in wanted_set for v in _values(payload, key))

    return Clause(test, neutral, frozenset({key}))


def _match_text(key: str, wanted: Any, where: str) -> Clause:
    if key != MESSAGE_IDS or not isinstance(wanted, str):
        raise InvalidInput(f"{where}.text: taken only on {MESSAGE_IDS!r}, with a string")
    wanted = _text(wanted, f"{where}.text").strip()

    def test(_: str, payload: Mapping[str, Any]) -> bool:
        return any(
            isinstance(v, str) and wanted in (part.strip() for part in v.split(","))
            for v in _values(payload, key)
        )

    return Clause(test, None, frozenset({key}))


def _bound(value: Any, where: str) -> int | float | None:
    if value is None or (type(value) is int and MIN_INT <= value <= MAX_INT):
        return value
    if type(value) is float and math.isfinite(value):
        return value
    raise InvalidInput(f"{where}: a finite number or null")


def _range(key: str, raw: Any, where: str) -> Clause:
    if not isinstance(raw, dict) or not set(raw) <= RANGE_KEYS:
        raise InvalidInput(f"{where}: an object of gt, gte, lt, lte")
    bounds = {name: _bound(raw.get(name), f"{where}.{name}") for name in sorted(RANGE_KEYS)}
    gt, gte, lt, lte = bounds["gt"], bounds["gte"], bounds["lt"], bounds["lte"]

    def within(v: Any) -> bool:
        if type(v) not in (int, float):
            return False
        return (
            (gt is None or v > gt)
            and (gte is None or v >= gte)
            and (lt is None or v < lt)
            and (lte is None or v <= lte)
        )

    whole = {name: b for name, b in bounds.items() if b is None or type(b) is int}
    neutral = Range(key, **whole) if len(whole) == len(bounds) else None
    return Clause(lambda _, p: any(within(v) for v in _values(p, key)), neutral, frozenset({key}))


def _field_of(raw: Any, where: str) -> str:
    if not isinstance(raw, dict) or set(raw) != {"key"}:
        raise InvalidInput(f"{where}: an object with the field's `key`")
    return _key(raw, where)


def _is_empty(raw: Any, where: str) -> Clause:
    key = _field_of(raw, where)
    return Clause(lambda _, p: p.get(key) in (None, []), IsEmpty(key), frozenset({key}))


def _is_null(raw: Any, where: str) -> Clause:
    key = _field_of(raw, where)
    return Clause(lambda _, p: key in p and p[key] is None, None, frozenset({key}))


def _has_id(raw: Any, where: str) -> Clause:
    if not isinstance(raw, list) or len(raw) > MAX_VALUES:
        raise InvalidInput(f"{where}: a list of at most {MAX_VALUES} point ids")
    ids = []
    for value in raw:
        normal = point_id_of(value)
        if normal is None:
            raise InvalidInput(f"{where}: {str(value)[:80]!r} is not a point id")
        ids.append(normal)
    wanted = frozenset(ids)
    return Clause(lambda pid, _: pid in wanted, HasIds(tuple(ids)))


def _has_vector(raw: Any, where: str) -> Clause:
    if not isinstance(raw, str):
        raise InvalidInput(f"{where}: a vector name")
    return Clause(None, HasVector(_text(raw, where)))


def point_id_of(value: Any) -> str | None:
    """A point id as Qdrant takes it (an unsigned integer or a UUID), in the stores' form."""
    if type(value) is int:
        return str(value) if 0 <= value <= 2**64 - 1 else None
    if isinstance(value, str) and not value.isdigit():
        return normal_point_id(value)
    return None


_SINGLE: dict[str, Callable[[Any, str], Clause]] = {
    "is_empty": _is_empty,
    "is_null": _is_null,
    "has_id": _has_id,
    "has_vector": _has_vector,
}

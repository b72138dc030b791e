"""Qdrant's REST filters: what goes to the engine, what is checked here, and how (tables)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.errors import InvalidInput
from shared.store.filters import Filter, HasIds, HasVector, IsEmpty, Match, MatchAny, Range
from shared.store.rest_filters import MAX_CONDITIONS, read_filter

UUID = "6f1c0b7e-3d0a-5c4e-9a55-6d656d706f6f"


def field(key: str, **condition: Any) -> dict[str, Any]:
    return {"key": key, **condition}


def text(value: str) -> dict[str, Any]:
    return field("messageIds", match={"text": value})


# (filter, what the engine is given, whether a part is left to check here)
SPLITS = [
    (None, None, False),
    ({}, None, False),
    ({"must": [field("character", match={"value": "Seraphina"})]},
     Filter(must=(Match("character", "Seraphina"),)), False),
    ({"must": field("n", match={"value": 3})}, Filter(must=(Match("n", 3),)), False),
    ({"must_not": [field("source", match={"any": ["discord", "hermes"]})]},
     Filter(must_not=(MatchAny("source", ("discord", "hermes")),)), False),
    ({"must": [field("timestamp", range={"gte": 1, "lt": 5})]},
     Filter(must=(Range("timestamp", gte=1, lt=5),)), False),
    ({"must": [{"is_empty": {"key": "source"}}, {"has_id": [UUID, 7]}]},
     Filter(must=(IsEmpty("source"), HasIds((UUID, "7")))), False),
    ({"must_not": [{"has_vector": "bm25"}]}, Filter(must_not=(HasVector("bm25"),)), False),
    # one `should` condition must hold: the engine takes it as a `must`
    ({"should": [field("a", match={"value": "x"})]}, Filter(must=(Match("a", "x"),)), False),
    # left to check here: text matches, several `should`, bools, fractions, nulls, nesting
    ({"should": [text("m1"), text("m2")]}, None, True),
    ({"must": [field("isChunk", match={"value": True}), field("a", match={"value": "x"})]},
     Filter(must=(Match("a", "x"),)), True),
    ({"must": [field("t", range={"gt": 0.5})]}, None, True),
    ({"must": [{"is_null": {"key": "t"}}]}, None, True),
    ({"must": [field("n", match={"any": [1, 2]})]}, None, True),
    ({"must": [{"must_not": [field("a", match={"value": "x"})]}]}, None, True),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "store", "rest"), SPLITS)
def test_what_the_engine_is_given(raw: Any, store: Filter | None, rest: bool) -> None:
    read = read_filter(raw)
    assert read.store == store
    assert (read.rest is not None) == rest


ST_POINT = {"text": "hi", "messageIds": "Sera_1_1, Sera_1_2", "isChunk": True, "n": 2}
# (filter, payload, matches)
MATCHES = [
    # st-qdrant-memory's dedupe: one of the comma-separated ids, trimmed; never a substring
    ({"should": [text("Sera_1_2"), text("x")]}, ST_POINT, True),
    ({"should": [text("Sera_1"), text("x")]}, ST_POINT, False),
    ({"should": [text("Sera_1_"), text("ra_1_1")]}, ST_POINT, False),
    ({"should": [text("Sera_1_1"), text("x")]}, {"messageIds": ["Sera_1_1,z"]}, True),
    ({"should": [text("a"), text("b")]}, {}, False),
    # Qdrant's equality: a bool is no integer, an integer no float, a list holds its elements
    ({"must": [field("isChunk", match={"value": True})]}, ST_POINT, True),
    ({"must": [field("isChunk", match={"value": 1})]}, ST_POINT, False),
    ({"must": [field("n", match={"value": True})]}, ST_POINT, False),
    ({"must": [field("n", match={"any": [1, 2]})]}, {"n": 2.0}, False),
    ({"must": [field("n", match={"any": [1, 2]})]}, {"n": [5, 2]}, True),
    ({"must": [field("n", range={"gt": 1.5, "lte": 2})]}, ST_POINT, True),
    ({"must": [field("n", range={"gt": 1.5})]}, {"n": True}, False),
    ({"must": [{"is_null": {"key": "n"}}]}, {"n": None}, True),
    ({"must": [{"is_null": {"key": "n"}}]}, {}, False),
    ({"must": [{"should": [{"is_null": {"key": "n"}}, text("Sera_1_1")]}]}, ST_POINT, True),
    ({"must_not": [{"should": [text("Sera_1_1"), text("q")]}]}, ST_POINT, False),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "payload", "expected"), MATCHES)
def test_what_is_checked_here(raw: Any, payload: dict[str, Any], expected: bool) -> None:
    read = read_filter({"must": [raw]})  # nested: all of it is checked here
    assert read.rest is not None and read.store is None
    assert read.matches(UUID, payload) is expected
    assert read.fields <= {"messageIds", "isChunk", "n"}


REFUSED = [
    ([], "a filter is an object"),
    ({"min_should": {"conditions": [], "min_count": 1}}, "'min_should' is not taken"),
    ({"must": 5}, "a condition or a list"),
    ({"must": [field("a.b", match={"value": 1})]}, "top-level payload field"),
    ({"must": [field("a", match={"value": 1.5})]}, "a string, a 64-bit integer or a bool"),
    ({"must": [field("a", match={"value": 2**64})]}, "a string, a 64-bit integer or a bool"),
    ({"must": [field("a", match={"any": ["x", 1]})]}, "all strings or all integers"),
    ({"must": [field("a", match={"text": "x"})]}, "taken only on 'messageIds'"),
    ({"must": [field("a", match={"except": ["x"]})]}, "match 'except' is not taken"),
    ({"must": [field("a", geo_radius={})]}, "one `match` or `range`"),
    ({"must": [field("a", range={"gte": "2024-01-01"})]}, "a finite number or null"),
    ({"must": [{"has_id": ["not-an-id"]}]}, "is not a point id"),
    ({"must": [{"has_id": ["12"]}]}, "is not a point id"),
    ({"should": [{"has_vector": "bm25"}, text("x")]}, "has_vector is taken only"),
    ({"must": [{"nested": {"key": "a", "filter": {}}}]}, "'nested' is not a condition"),
    ({"must": [{"must": [{"must": [{"must": [{"must": [{"must": [{"must": [{"must": [
        {"must": [{"must": []}]}]}]}]}]}]}]}]}]}, "nest 8 deep at most"),
    ({"should": [text(str(n)) for n in range(MAX_CONDITIONS + 1)]}, "conditions at most"),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "reason"), REFUSED)
def test_what_is_refused(raw: Any, reason: str) -> None:
    with pytest.raises(InvalidInput, match=reason.replace("(", r"\(").replace("[", r"\[")):
        read_filter(raw)

"""Golden tests of the recall filters: excluded message ids and duplicate texts."""

from __future__ import annotations

import pytest

from api.recall.rules import HitSelector, dedupe_key, is_excluded
from shared.format.payload import message_ids_of
from shared.format.recall_block import RecallHit


def test_message_ids_from_both_fields() -> None:
    assert message_ids_of({"messageIds": "a, b ,c"}) == {"a", "b", "c"}
    assert message_ids_of({"messageIds": "a,b", "messageIdList": ["b", "c"]}) == {"a", "b", "c"}
    assert message_ids_of({}) == set()
    assert message_ids_of({"messageIds": ""}) == set()


@pytest.mark.parametrize(
    ("payload", "excluded", "expected"),
    [
        (
            {"messageIds": "Seraphina_1718000000000_3,Seraphina_1718000060000_4"},
            {"Seraphina_1718000060000_4"},
            True,
        ),
        ({"messageIds": "m1,m10"}, {"m1"}, True),
        ({"messageIds": "m10,m11"}, {"m1"}, False),  # whole ids, never substrings
        ({"messageIds": "m10", "messageIdList": ["m10"]}, set(), False),
        ({"messageIdList": ["a", "b"]}, {"b"}, True),
    ],
)
def test_exclusion(payload: dict, excluded: set[str], expected: bool) -> None:
    assert is_excluded(payload, excluded) is expected


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("[2024-06-10]\nAlex: hi", "[2023-01-01] Alex:   hi ", True),
        ("Alex: hi", "Alex: hi!", False),
        ("x" * 200 + "tail one", "x" * 200 + "tail two", True),
        ("\ufeffAlex: hi", "Alex: hi", True),  # JS trims U+FEFF, Python's str.strip() does not
        ("[a-b] Alex", "Alex", False),  # only digits and dashes are date markers
        ("[١٢] Alex", "Alex", False),  # JS \d is ASCII only
    ],
)
def test_dedupe_key(a: str, b: str, same: bool) -> None:
    assert (dedupe_key(a) == dedupe_key(b)) is same


def test_dedupe_counts_utf16_units() -> None:
    # 150 emoji are 300 UTF-16 units: JS keeps the first 100 of them.
    assert dedupe_key("😀" * 150) == dedupe_key("😀" * 100 + "different")
    assert dedupe_key("😀" * 99 + "ab") != dedupe_key("😀" * 99 + "ac")
    assert len(dedupe_key("é" * 300)) == 400


def hit(hid: str, score: float, text: str, ids: str) -> RecallHit:
    return RecallHit(hid, score, {"text": text, "messageIds": ids})


def select_hits(
    candidates: list[RecallHit], excluded_ids: set[str], limit: int
) -> tuple[list[RecallHit], int]:
    """One list of candidates through HitSelector, as recall feeds it (select_hits was only
    used here, so it moved here)."""
    selector = HitSelector(excluded_ids, limit)
    examined = 0
    for candidate in candidates:
        if selector.full:
            break
        examined += 1
        selector.offer(candidate)
    return selector.kept, examined


def test_select_hits_filters_in_score_order_and_stops_at_limit() -> None:
    candidates = [
        hit("1", 0.9, "in context", "m1,m2"),
        hit("2", 0.8, "[2024-01-01] first", "m3"),
        hit("3", 0.7, "[2024-02-02] first", "m4"),  # same text as 2 once dated markers go
        hit("4", 0.6, "second", "m5"),
        hit("5", 0.5, "third", "m6"),
        hit("6", 0.4, "fourth", "m7"),
    ]
    kept, examined = select_hits(candidates, {"m2"}, limit=3)
    assert [h.id for h in kept] == ["2", "4", "5"]
    assert examined == 5
    kept, examined = select_hits(candidates, set(), limit=10)
    assert [h.id for h in kept] == ["1", "2", "4", "5", "6"] and examined == 6

"""The range of message times memory-pool stores: the years 1970 to 9999, after conversion."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.format.timestamps import (
    MAX_STORABLE_MS,
    UnstorableTime,
    from_number,
    normalize_timestamp,
    storable_timestamp,
)

NOW = 1_800_000_000_000


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1718000000000, 1718000000000),
        (1718000000, 1718000000000),
        ("1970-01-01T00:00:00Z", 0),
        ("9999-12-31T23:59:59.999Z", MAX_STORABLE_MS),
        (None, NOW),
        ("yesterday", NOW),
        (0, NOW),  # st-qdrant-memory reads small numbers as "no time": now
    ],
)
def test_storable_times(value: object, expected: int) -> None:
    assert storable_timestamp(value, NOW) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (1718000000000000, r"after 9999 \(about the year 56411\)"),
        ("0001-01-01T00:00:00+14:00", "before 1970"),
        ("1969-12-31T23:59:59.999Z", "before 1970"),
        (253402300800000, r"after 9999 \(about the year 10000\)"),
        ("9999-12-31T23:59:59-14:00", r"after 9999"),
        (1e30, r"beyond the year 10\^9"),
        (10**400, r"beyond the year 10\^9"),
        (float("inf"), "not a finite number"),
        (float("nan"), "not a finite number"),
        # a numeric string is read as its number (1e30 as a string is refused like 1e30), also
        # one too big for a float: before, it read as infinity, so as no time at all: now
        ("1e309", "not a finite number"),
        (" -1e400 ", "not a finite number"),
        ("9" * 400, "not a finite number"),
    ],
)
def test_unstorable_times(value: object, message: str) -> None:
    with pytest.raises(UnstorableTime, match=message):
        storable_timestamp(value, NOW)


def test_huge_integers_no_longer_overflow() -> None:
    # math.isfinite(10**400) raised OverflowError: a 500 on /save.
    assert from_number(10**400) == 10**400
    assert normalize_timestamp(10**400, NOW) == 10**400


def _reference_storable(value: object, now: int) -> int:
    # storable_timestamp as first written, without its fast path for epoch ms
    found = normalize_timestamp(value, now)
    if found < 0:
        raise UnstorableTime("is before 1970; storable times are the years 1970 to 9999")
    if found > MAX_STORABLE_MS:
        raise UnstorableTime("after 9999")
    return found


@settings(max_examples=500, deadline=None)
@given(
    st.integers(min_value=-(10**20), max_value=10**20)
    | st.sampled_from([10**12, 10**12 + 1, MAX_STORABLE_MS, MAX_STORABLE_MS + 1, 10**9])
)
def test_the_epoch_ms_fast_path_answers_as_the_conversion_does(value: int) -> None:
    try:
        expected: int | None = _reference_storable(value, NOW)
    except UnstorableTime:
        expected = None
    try:
        found: int | None = storable_timestamp(value, NOW)
    except UnstorableTime:
        found = None
    assert found == expected

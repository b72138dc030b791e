"""The range of message times memory-pool stores: the years 1970 to 9999, after conversion."""

from __future__ import annotations

import pytest

from shared.timestamps import (
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
    ],
)
def test_unstorable_times(value: object, message: str) -> None:
    with pytest.raises(UnstorableTime, match=message):
        storable_timestamp(value, NOW)


def test_huge_integers_no_longer_overflow() -> None:
    # math.isfinite(10**400) raised OverflowError: a 500 on /save.
    assert from_number(10**400) == 10**400
    assert normalize_timestamp(10**400, NOW) == 10**400

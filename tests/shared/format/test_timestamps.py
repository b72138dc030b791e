"""Golden tests of timestamp normalisation (st-qdrant-memory's normalizeTimestamp)."""

from __future__ import annotations

import pytest

from shared.format.timestamps import normalize_timestamp

NOW = 1_800_000_000_000


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1718000000000, 1718000000000),
        (1718000000000.7, 1718000000000),
        (1718000000, 1718000000000),
        (1718000000.5, 1718000000500),
        (1_000_000_000_000, NOW),  # exactly 1e12: neither branch, as in the extension
        (1_000_000_000, NOW),
        (5, NOW),
        (-1718000000000, NOW),
        (float("nan"), NOW),
        (float("inf"), NOW),
        (True, NOW),
        (None, NOW),
        ("", NOW),
        ("   ", NOW),
        ("2025-11-23T10:00:00.000Z", 1763892000000),
        ("2025-11-23T10:00:00.123Z", 1763892000123),
        ("1970-01-01T00:00:00Z", 0),  # a real instant, even if falsy
        ("1969-12-31T23:59:59.999Z", -1),  # as JavaScript: Date.parse gives -1, not NaN
        ("2025-11-23T11:00:00+01:00", 1763892000000),
        ("2025-11-23", 1763856000000),
        ("2025-11-23T10:00:00", 1763892000000),
        ("1718000000000", 1718000000000),
        ("1718000000", 1718000000000),
        ("June 19, 2023 2:20pm", NOW),
        ("2023-5-20 @15h 30m 45s 123ms", NOW),
        ({"ts": 1}, NOW),
    ],
)
def test_normalize_timestamp(value: object, expected: int) -> None:
    assert normalize_timestamp(value, NOW) == expected

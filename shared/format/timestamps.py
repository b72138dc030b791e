"""Message times to Unix ms, the way st-qdrant-memory's normalizeTimestamp reads them, and the
range of times memory-pool stores."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

MS_THRESHOLD = 1_000_000_000_000  # above: already milliseconds
SECONDS_THRESHOLD = 1_000_000_000  # between the two: epoch seconds

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_MS = timedelta(milliseconds=1)
MS_PER_YEAR = 31_556_952_000  # a Gregorian year's average, exact in ms


class UnstorableTime(ValueError):
    """A message time that reads as an instant outside the years memory-pool stores."""


def epoch_ms(moment: datetime) -> int:
    """Exact Unix ms of an aware datetime (a float timestamp * 1000 can land 1 ms short)."""
    return (moment - EPOCH) // ONE_MS


def number_ms(value: float) -> float | None:
    """st-qdrant-memory's number rule: above 1e12 is ms, between 1e9 and 1e12 is seconds (so
    times 1000); anything else, an infinity or NaN too, is no time."""
    # An int is always finite; math.isfinite would overflow on one of 400 digits.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value > MS_THRESHOLD:
        return value
    if SECONDS_THRESHOLD < value < MS_THRESHOLD:
        return value * 1000
    return None


def from_number(value: float) -> int | None:
    """Unix ms of a number by st-qdrant-memory's rule (number_ms), whole."""
    ms = number_ms(value)
    return None if ms is None else int(ms)


def from_iso(text: str) -> int | None:
    """ISO 8601 to Unix ms; without an offset it is read as UTC."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        # JavaScript reads a date-only ISO string as UTC; a service has no "local" user, so a
        # date-time without an offset is read as UTC too.
        parsed = parsed.replace(tzinfo=UTC)
    return epoch_ms(parsed)


def normalize_timestamp(value: object, now_ms: int) -> int:
    """Epoch ms from ms, seconds or ISO 8601; anything else, like the extension, is "now".

    Numeric strings are read as numbers (JavaScript's Date would reject them and fall back to
    now), since a client sending "1718000000000" clearly means that instant.
    """
    found: int | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        found = from_number(value)
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            found = from_number(float(text))
        except ValueError:
            found = from_iso(text)
    return now_ms if found is None else found


# Years 1970 to 9999: what a chunk's `[YYYY-MM-DD]` date and every reader's date code can show.
MIN_STORABLE_MS = 0
MAX_STORABLE_MS = epoch_ms(datetime(9999, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC))


def _infinite_number(value: object) -> bool:
    """A numeric string too big for a float ("1e309", 400 nines): read as its number, it is no
    instant at all, as the JSON number 1e400 is not (a word like "Infinity" is no number)."""
    if not isinstance(value, str):
        return False
    try:
        number = float(value)
    except ValueError:
        return False
    return math.isinf(number) and any(char.isdigit() for char in value)


def storable_timestamp(value: object, now_ms: int) -> int:
    """normalize_timestamp for a message to store: raises UnstorableTime for a number that is
    not finite, or an instant (after the ms/seconds/ISO conversion) outside years 1970-9999.

    Strings keep the extension's rule (unreadable is "now"); a JSON number like 1e400 (read as
    infinity) is no instant at all.
    """
    if type(value) is int and MS_THRESHOLD < value <= MAX_STORABLE_MS:
        return value  # epoch ms, what nearly every client sends: no rule below changes it
    if (isinstance(value, float) and not math.isfinite(value)) or _infinite_number(value):
        raise UnstorableTime("is not a finite number")
    found = normalize_timestamp(value, now_ms)
    if found < MIN_STORABLE_MS:
        raise UnstorableTime("is before 1970; storable times are the years 1970 to 9999")
    if found > MAX_STORABLE_MS:
        # Integers only: a float would overflow on 10**400.
        years = (found + MS_PER_YEAR // 2) // MS_PER_YEAR
        about = f"about the year {1970 + years}" if years < 10**9 else "beyond the year 10^9"
        raise UnstorableTime(
            f"reads as a time after 9999 ({about}); storable times are the years 1970 to 9999"
        )
    return found

"""Message times to Unix ms, the way st-qdrant-memory's normalizeTimestamp reads them."""

from __future__ import annotations

import math
from datetime import UTC, datetime

MS_THRESHOLD = 1_000_000_000_000  # above: already milliseconds
SECONDS_THRESHOLD = 1_000_000_000  # between the two: epoch seconds


def _from_number(value: float) -> int | None:
    if not math.isfinite(value):
        return None
    if value > MS_THRESHOLD:
        return int(value)
    if SECONDS_THRESHOLD < value < MS_THRESHOLD:
        return int(value * 1000)
    return None


def _from_iso(text: str) -> int | None:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        # JavaScript reads a date-only ISO string as UTC; a service has no "local" user, so a
        # date-time without an offset is read as UTC too.
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)


def normalize_timestamp(value: object, now_ms: int) -> int:
    """Epoch ms from ms, seconds or ISO 8601; anything else, like the extension, is "now".

    Numeric strings are read as numbers (JavaScript's Date would reject them and fall back to
    now), since a client sending "1718000000000" clearly means that instant.
    """
    if isinstance(value, bool):
        return now_ms
    if isinstance(value, int | float):
        return _from_number(value) or now_ms
    if isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            return _from_number(float(text)) or now_ms
        except ValueError:
            return _from_iso(text) or now_ms
    return now_ms

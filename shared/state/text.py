"""Redis replies as text: clients made with or without decode_responses answer str or bytes."""

from __future__ import annotations


def as_text(value: object) -> str:
    """A reply value as str (bytes decoded as UTF-8, anything else through str)."""
    return value.decode() if isinstance(value, bytes) else str(value)

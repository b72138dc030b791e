"""A message text's fingerprint: what the dedupe mark keeps to tell an edit from a re-send."""

from __future__ import annotations

from hashlib import blake2b

FINGERPRINT_HEX = 16


def text_fingerprint(text: str) -> str:
    """16 hex digits of the trimmed text's BLAKE2b: the mark never holds the text itself, and
    a chance collision (1 in 2^64 per edit) would only keep an edit from being seen."""
    return blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()

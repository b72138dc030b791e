"""st-qdrant-memory's recall filters as pure rules: excluded message ids and duplicate texts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from shared.format import fields
from shared.format.payload import message_ids_of
from shared.format.recall_block import RecallHit

DEDUPE_PREFIX_UTF16_UNITS = 200
MIN_PAGE = 10  # st-qdrant-memory's own search size
MAX_PAGES = 8  # a bound on over-fetching, however many hits are excluded

# JavaScript's \s and String.prototype.trim() whitespace (WhiteSpace + LineTerminator), which
# differs from Python's \s (JS includes U+FEFF; Python includes U+001C-U+001F).
_JS_SPACE = "".join(
    chr(code)
    for code in (
        9,
        10,
        11,
        12,
        13,
        32,
        0xA0,
        0x1680,
        *range(0x2000, 0x200B),
        0x2028,
        0x2029,
        0x202F,
        0x205F,
        0x3000,
        0xFEFF,
    )
)
_JS_SPACE_RUN = re.compile(f"[{re.escape(_JS_SPACE)}]+")
_DATE_MARKER = re.compile(r"\[[0-9-]+\]")


def is_excluded(payload: Mapping[str, Any], excluded_ids: set[str]) -> bool:
    """A chunk holding a message already in the reader's context is never recalled."""
    return bool(excluded_ids) and not message_ids_of(payload).isdisjoint(excluded_ids)


def dedupe_key(text: str) -> bytes:
    """The text-dedupe key: date markers out, whitespace collapsed, trimmed, first 200 UTF-16 units.

    JavaScript counts string length in UTF-16 code units, so the cut is made on the UTF-16 bytes
    (a character outside the BMP counts twice, and may be cut in half as JS would).
    """
    cleaned = _JS_SPACE_RUN.sub(" ", _DATE_MARKER.sub("", text)).strip(_JS_SPACE)
    return cleaned.encode("utf-16-le", "surrogatepass")[: DEDUPE_PREFIX_UTF16_UNITS * 2]


class HitSelector:
    """Keeps hits in score order, dropping excluded and duplicate-text ones, up to `limit`.

    Fed page by page, so a caller over-fetching from Qdrant keeps one dedupe state across pages.
    """

    def __init__(self, excluded_ids: set[str], limit: int) -> None:
        self.excluded = excluded_ids
        self.limit = limit
        self.kept: list[RecallHit] = []
        self._seen: set[bytes] = set()

    @property
    def full(self) -> bool:
        return len(self.kept) >= self.limit

    def offer(self, hit: RecallHit) -> None:
        if self.full or is_excluded(hit.payload, self.excluded):
            return
        key = dedupe_key(str(hit.payload.get(fields.TEXT, "")))
        if key in self._seen:
            return
        self._seen.add(key)
        self.kept.append(hit)

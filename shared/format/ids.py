"""Identifier rules at the door: which ids can be stored, and how names and text are cleaned."""

from __future__ import annotations

import hashlib
import re

MAX_ID_CHARS = 256  # message, user, channel, guild and conversation ids
MAX_NAME_CHARS = 128  # speaker names, after they are made one line
MAX_SOURCE_CHARS = 64  # "discord", "hermes", "sillytavern", …
SHOWN_CHARS = 64  # how much of a refused value an answer or a log line repeats

# C0 and C1 control characters (category Cc) and lone surrogates, which no UTF-8 store takes.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# In message text tab, newline and carriage return are content; the other controls are not.
_TEXT_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# A speaker name is one line of chunk text: every run of whitespace or controls is one space.
_NAME_BREAKS = re.compile(r"[\s\x00-\x1f\x7f-\x9f]+")
# What a derived id escapes: st-qdrant-memory joins and splits `messageIds` on commas.
_ESCAPED = re.compile(r"[,%\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_HASH_CHARS = 16


def replace_surrogates(text: str) -> str:
    """Lone surrogates (`\\ud800` in JSON) become U+FFFD: they cannot be encoded as UTF-8."""
    return _SURROGATE.sub("\ufffd", text)


def clean_text(text: str) -> str:
    """Message text as stored: surrogates replaced, NUL and the other controls removed (tab,
    newline and carriage return stay)."""
    if text.isprintable():
        return text  # no control character and no surrogate: most messages, without a regex
    return _TEXT_CONTROL.sub("", replace_surrogates(text))


def one_line_name(name: str) -> str:
    """A speaker name as chunk text shows it: one line, trimmed, at most MAX_NAME_CHARS."""
    if name.isprintable() and "  " not in name:
        flat = name.strip()  # only single ASCII spaces inside: the regex would change nothing
    else:
        flat = _NAME_BREAKS.sub(" ", replace_surrogates(name)).strip()
    return flat[:MAX_NAME_CHARS].rstrip()


def shown(value: str, limit: int = SHOWN_CHARS) -> str:
    """A value safe to repeat in an answer or a log line: encodable and short."""
    text = replace_surrogates(value)
    return text if len(text) <= limit else text[:limit] + "…"


def is_plain(value: str, max_chars: int = MAX_ID_CHARS) -> bool:
    """ASCII letters and digits only, and not too long: an id no rule below can refuse.

    Snowflakes and most ids are plain, so nearly every message is checked without a regex; and
    since a run of plain ids joined is plain, one call can clear all the ids of a message.
    """
    return value.isascii() and value.isalnum() and len(value) <= max_chars


def id_problem(value: str, max_chars: int = MAX_ID_CHARS) -> str | None:
    """Why an id (user, channel, guild, conversation, source) cannot be stored, or None."""
    if is_plain(value, max_chars):
        return None
    if len(value) > max_chars:
        return f"is {len(value)} characters long; the limit is {max_chars}"
    if _CONTROL.search(value):
        return "contains a control character"
    if _SURROGATE.search(value):
        return "contains a lone surrogate (not valid Unicode)"
    return None


def message_id_problem(value: str) -> str | None:
    """Why a message id cannot be stored, or None. Stored ids are comma-joined in `messageIds`
    and trimmed by st-qdrant-memory when it splits them, so neither may change an id."""
    if is_plain(value):
        return None  # a snowflake: none of the rules below can apply
    if not value:
        return "is empty"
    if "," in value:
        return "contains a comma (messageIds are comma-separated)"
    if value != value.strip():
        return "has leading or trailing whitespace"
    return id_problem(value)


def storable_id(raw: str) -> str:
    """`raw` when it is a storable message id; else a stable storable id derived from it.

    Commas, `%`, control characters and lone surrogates are percent-escaped (`,` -> `%2C`),
    and so is whitespace at either end; an id still over MAX_ID_CHARS keeps its start and ends
    in `~` and a hash of the whole id.
    """
    if message_id_problem(raw) is None:
        return raw
    escaped = _ESCAPED.sub(lambda m: _escape(m.group()), raw)
    start = len(escaped) - len(escaped.lstrip())
    end = len(escaped.rstrip())
    escaped = (
        "".join(_escape(c) for c in escaped[:start])
        + escaped[start:end]
        + "".join(_escape(c) for c in escaped[end:])
    )
    if len(escaped) <= MAX_ID_CHARS and escaped:
        return escaped
    digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]
    keep = escaped[: MAX_ID_CHARS - _HASH_CHARS - 1]
    return f"{keep}~{digest}"


def _escape(char: str) -> str:
    code = ord(char)
    return f"%{code:02X}" if code <= 0xFF else f"%u{code:04X}"

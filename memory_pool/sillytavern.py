"""SillyTavern chat files (.jsonl): header, messages, send dates, speakers and message ids.

Pure: it reads the lines it is given and nothing else. The layout follows SillyTavern's own
reader (`/api/chats/get`): the file is split on "\\n", every line that parses as a truthy JSON
value is one element of the chat array, the first element is the header, and a line that does
not parse takes no index. st-qdrant-memory indexes that same array, so its message ids count the
header as index 0.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from shared.format.ids import storable_id
from shared.format.naming import DEFAULT_USER_SPEAKER
from shared.format.timestamps import (
    epoch_ms,
    from_iso,
    from_number,
    number_ms,
)

UNUSED_NAME = "unused"  # what newer SillyTavern writes into the header's name fields

# "2023-5-20 @15h 30m 45s 123ms" (older SillyTavern) and "2024-07-12@01h31m37s123ms" (newer).
_HUMANIZED = re.compile(
    r"(?P<y>\d{4})-(?P<mo>\d{1,2})-(?P<d>\d{1,2}) ?@ ?(?P<h>\d{1,2})h ?(?P<mi>\d{1,2})m"
    r" ?(?P<s>\d{1,2})s(?: ?(?P<ms>\d{1,3})ms)?",
    re.ASCII,
)
# "June 19, 2023 2:20pm" (SillyTavern's message timestamp), also "Jun 19 2023 14:20".
_WORDY = re.compile(
    r"(?P<month>[A-Za-z]+)\.? (?P<d>\d{1,2}),? (?P<y>\d{4}),? (?P<h>\d{1,2}):(?P<mi>\d{2})"
    r"(?::(?P<s>\d{2}))? ?(?P<ampm>[AaPp][Mm])?",
    re.ASCII,
)
_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
            ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
            ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}  # fmt: skip
# ECMAScript's date-time string format, the only strings whose `new Date(str)` is specified.
# Date-only forms are UTC; date-times without Z or an offset are the browser's local time.
_ES_ISO = re.compile(
    r"\d{4}(?:-\d{2}(?:-\d{2})?)?"
    r"(?P<time>T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?P<zone>Z|[+-]\d{2}:\d{2})?)?",
    re.ASCII,
)


def _utc(year: int, month: int, day: int, hour: int, minute: int, second: int, ms: int) -> int:
    return epoch_ms(datetime(year, month, day, hour, minute, second, ms * 1000, tzinfo=UTC))


def _from_humanized(text: str) -> int | None:
    match = _HUMANIZED.fullmatch(text)
    if not match:
        return None
    y, mo, d, h, mi, s = (int(match[k]) for k in ("y", "mo", "d", "h", "mi", "s"))
    return _utc(y, mo, d, h, mi, s, int(match["ms"] or 0))


def _from_wordy(text: str) -> int | None:
    match = _WORDY.fullmatch(text)
    month = _MONTHS.get(match["month"].lower()) if match else None
    if not match or month is None:
        return None
    hour, ampm = int(match["h"]), (match["ampm"] or "").lower()
    if ampm and not 1 <= hour <= 12:
        return None
    if ampm:
        hour = hour % 12 + (12 if ampm == "pm" else 0)
    return _utc(int(match["y"]), month, int(match["d"]), hour, int(match["mi"]),
                int(match["s"] or 0), 0)  # fmt: skip


def parse_send_date(value: object) -> int | None:
    """Unix ms of a message's `send_date` in any form SillyTavern wrote; None if unreadable.

    Epoch numbers (and numeric strings) follow st-qdrant-memory's ms/seconds rule. ISO 8601
    honours its offset. SillyTavern's own forms carry no time zone (they were the browser's
    local time) and are read as UTC, as is an ISO date-time without an offset.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return from_number(value)
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        return from_number(float(text))
    except ValueError:
        pass
    for parse in (from_iso, _from_humanized, _from_wordy):
        try:
            found = parse(text)
        except (ValueError, OverflowError):  # a form that matched with an impossible date
            return None
        if found is not None:
            return found
    return None


def _js_number(value: float) -> str:
    """A number as JavaScript's String(number) writes it (in the range epoch values use)."""
    if isinstance(value, int) or value.is_integer():
        return str(int(value))
    return repr(value)


def stqm_timestamp(value: object) -> str | None:
    """The `<ms>` st-qdrant-memory's normalizeTimestamp puts in a message id, when that does
    not depend on the browser: epoch numbers, and ISO strings that are UTC by definition.

    Everything else (SillyTavern's own forms, numeric strings, local ISO date-times) made it fall
    back to `Date.now()` or to the browser's time zone, which cannot be reproduced: None.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        ms = number_ms(value)
        return None if ms is None else _js_number(ms)
    if not isinstance(value, str):
        return None
    match = _ES_ISO.fullmatch(value)
    if not match or (match["time"] and not match["zone"]):
        return None
    ms = from_iso(value)
    return None if ms is None else str(ms)


@dataclass(frozen=True, slots=True)
class ChatHeader:
    """The first element of a chat file; a name is None when missing or "unused"."""

    user_name: str | None = None
    character_name: str | None = None


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message line: where it is, who sent it, its chosen text and its parsed time."""

    line: int  # 1-based line in the file
    index: int  # position in SillyTavern's chat array, the header being 0
    is_user: bool
    is_system: bool
    text: str  # `mes`, trimmed; `swipes` (the alternatives) are never read
    send_date: object  # as written
    ts: int | None  # Unix ms, None when the send_date is unreadable


@dataclass(frozen=True, slots=True)
class LineProblem:
    line: int
    reason: str


@dataclass(frozen=True, slots=True)
class ChatFile:
    name: str
    header: ChatHeader
    messages: tuple[ChatMessage, ...]
    problems: tuple[LineProblem, ...]  # lines that are no message at all


def _name(value: object) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    name = value.strip()
    return None if name.casefold() == UNUSED_NAME else name


def _js_truthy(value: object) -> bool:
    # SillyTavern drops parsed lines that are falsy in JavaScript: false, 0, "" and null.
    if value is None or value is False or value == "":
        return False
    return not (isinstance(value, int | float) and value == 0)


def _no_constants(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _json(line: str) -> tuple[object, str | None]:
    try:
        return json.loads(line, parse_constant=_no_constants), None
    except ValueError as exc:
        return None, f"not JSON ({exc})"


def _message(record: Mapping[str, object], line: int, index: int) -> ChatMessage:
    mes = record.get("mes")
    send_date = record.get("send_date")
    return ChatMessage(
        line=line,
        index=index,
        is_user=bool(record.get("is_user")),
        is_system=bool(record.get("is_system")),
        text=mes.strip() if isinstance(mes, str) else "",
        send_date=send_date,
        ts=parse_send_date(send_date),
    )


def parse_chat(name: str, lines: Iterable[str]) -> ChatFile:
    """Read a chat file's lines (as split on "\\n"); bad lines become problems, not errors."""
    header, messages, problems = ChatHeader(), [], []
    index = 0
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        record, error = _json(raw)
        if error is not None:
            problems.append(LineProblem(number, error))
            continue
        if not _js_truthy(record):
            continue
        index, position = index + 1, index
        is_message = isinstance(record, dict) and "mes" in record
        if position == 0 and isinstance(record, dict) and not is_message:
            header = ChatHeader(_name(record.get("user_name")), _name(record.get("character_name")))
        elif is_message and isinstance(record, dict):
            messages.append(_message(record, number, position))
        else:
            problems.append(LineProblem(number, "not a chat message (no `mes`)"))
    return ChatFile(name, header, tuple(messages), tuple(problems))


def user_speaker(
    persona: str | None, header: ChatHeader, speaker_aliases: Mapping[str, str]
) -> str:
    """Who the user is in chunk text: the given persona, the file's user name, the agent's only
    alias (one person talks to it), else "User"."""
    if persona and persona.strip():
        return persona.strip()
    if header.user_name:
        return header.user_name
    aliases = set(speaker_aliases.values())
    if len(aliases) == 1:
        return aliases.pop()
    return DEFAULT_USER_SPEAKER


def id_character(header: ChatHeader, self_speaker: str) -> str:
    """The character name st-qdrant-memory puts first in its message ids."""
    return header.character_name or self_speaker


def message_id(chat: ChatFile, message: ChatMessage, character: str) -> str:
    """st-qdrant-memory's `<character>_<ms>_<index>` where its timestamp is reproducible, so
    chats it already indexed are recognised; else a stable `st:<file>:<line>`.

    A character or file name that would make the id unstorable (a comma, control characters,
    over 256 characters) is escaped or hashed (shared/format/ids.py::storable_id). st-qdrant-memory
    splits its `messageIds` on commas, so it never matched such an id itself.
    """
    stamp = stqm_timestamp(message.send_date)
    if stamp is not None:
        return storable_id(f"{character}_{stamp}_{message.index}")
    return storable_id(f"st:{chat.name}:{message.line}")

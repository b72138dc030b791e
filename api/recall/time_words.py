"""Time words in a recall's query ("yesterday", "last weekend", "in May") as a window in Unix ms:
a small English vocabulary finds the phrases, dateparser reads them against the request's time."""

from __future__ import annotations

import re
from calendar import monthrange
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from dateparser.date import DateDataParser

_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
# A month only with a preposition, a day or a year: "May I ask", "march on", "June said" are none
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_MONTHS_BUT_MAY = _MONTHS.replace("|may", "")  # "you may 2-step": May needs its capital here
_NUMBER = r"\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
_DAY_OF_MONTH = r"\d{1,2}(?:st|nd|rd|th)?\b"
_YEAR = r"(?:19|20)\d\d"
# Only words pointing into the past: "today", "tonight" and "now" are said in ordinary talk all
# the time, and today's chat is mostly in the reader's context already (clients exclude it).
_PHRASE = re.compile(
    rf"""\b(?:
        (?:the\ day\ before\ )?yesterday
      | (?:{_NUMBER})\ (?:day|week|month|year)s?\ ago
      | (?:last|this)\ (?:weekend|week|month|year|night|{_WEEKDAYS})
      | (?:in|on|during|of)\ (?:{_MONTHS})(?:\ {_DAY_OF_MONTH})?(?:,?\ {_YEAR})?
      | (?:{_MONTHS_BUT_MAY}|(?-i:May))\ (?:{_DAY_OF_MONTH}(?:,?\ {_YEAR})?|{_YEAR})
      | on\ (?:{_WEEKDAYS})
      | (?:in|during)\ {_YEAR}(?!-\d\d-\d\d\b)  # "in 2026-05-03" is that day, below
      | {_YEAR}-\d\d-\d\d
    )\b""",
    re.IGNORECASE | re.VERBOSE | re.ASCII,
)
_PREPOSITION = re.compile(r"^(?:in|on|during|of)\s+", re.IGNORECASE)
_WEEKEND = re.compile(r"\bweekend\b", re.IGNORECASE)
_SPACES = re.compile(r"\s+")
_DAY_MS = 86_400_000
# Distinct phrases read per query (the first ones): dateparser takes 0.4 to 15 ms a phrase under
# the GIL, and a query of 8,000 characters holds hundreds ("1 days ago 2 days ago ..."). A
# question names one or two; every phrase found still leaves the text.
MAX_PHRASES = 4


@dataclass(frozen=True, slots=True)
class TimeWindow:
    since: int  # Unix ms, inclusive: 00:00 UTC of the window's first day
    until: int  # Unix ms, inclusive: the last millisecond of its last day
    phrases: tuple[str, ...]
    rest: str  # the query without the phrases


def _span(phrase: str, now: datetime) -> tuple[date, date] | None:
    """The days a phrase means: the period dateparser reports around the date it reads."""
    core = _PREPOSITION.sub("", phrase)
    # a parser per call (0.4 ms): its relative base is the request's time
    parser = DateDataParser(
        languages=["en"], settings={"PREFER_DATES_FROM": "past", "RELATIVE_BASE": now}
    )
    # "last weekend" is the weekend of "last week": dateparser has no weekends
    try:
        found = parser.get_date_data(_WEEKEND.sub("week", core))
        if found.date_obj is None:
            return None
        return _period(found.date_obj.date(), found.period, bool(_WEEKEND.search(core)))
    except OverflowError:
        return None  # a window reaching past year 9999 (`now` at its end): no window


def _period(day: date, period: str | None, weekend: bool) -> tuple[date, date]:
    if period == "year":
        return date(day.year, 1, 1), date(day.year, 12, 31)
    if period == "month":
        return day.replace(day=1), day.replace(day=monthrange(day.year, day.month)[1])
    if period == "week":
        monday = day - timedelta(days=day.weekday())
        first = monday + timedelta(days=5) if weekend else monday
        return first, monday + timedelta(days=6)
    return day, day


def find_window(text: str, now_ms: int) -> TimeWindow | None:
    """The window the query's time words name (UTC days), or None when it names none.

    Several phrases give the span from the earliest to the latest day (of the first
    MAX_PHRASES distinct ones)."""
    phrases = [m.group(0) for m in _PHRASE.finditer(text)]
    if not phrases:
        return None  # the common case, and dateparser is never called
    now = datetime.fromtimestamp(now_ms / 1000, UTC).replace(tzinfo=None)
    distinct: dict[str, str] = {}
    for phrase in phrases:
        distinct.setdefault(phrase.lower(), phrase)
    read = list(distinct.values())[:MAX_PHRASES]
    spans = [s for s in (_span(p, now) for p in read) if s is not None]
    if not spans:
        return None
    first, last = min(s[0] for s in spans), max(s[1] for s in spans)
    rest = _SPACES.sub(" ", _PHRASE.sub(" ", text)).strip()
    return TimeWindow(_ms(first), _ms(last) + _DAY_MS - 1, tuple(phrases), rest)


def _ms(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)

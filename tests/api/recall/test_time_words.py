"""Time words in a query as a window of UTC days, against a fixed `now` (Friday 2026-12-04)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from api.recall import time_words
from api.recall.time_words import find_window

NOW = int(datetime(2026, 12, 4, 18, 30, tzinfo=UTC).timestamp() * 1000)
DAY = 86_400_000


def _day(year: int, month: int, day: int) -> int:
    return int(datetime(year, month, day, tzinfo=UTC).timestamp() * 1000)


@pytest.mark.parametrize(
    ("query", "first", "last", "rest"),
    [
        ("what did we do yesterday?", (2026, 12, 3), (2026, 12, 3), "what did we do ?"),
        ("the day before yesterday", (2026, 12, 2), (2026, 12, 2), ""),
        ("what did we cook two days ago", (2026, 12, 2), (2026, 12, 2), "what did we cook"),
        ("what did we do last weekend?", (2026, 11, 28), (2026, 11, 29), "what did we do ?"),
        ("anything fun last week", (2026, 11, 23), (2026, 11, 29), "anything fun"),
        ("this week at work", (2026, 11, 30), (2026, 12, 6), "at work"),
        ("a week ago", (2026, 11, 23), (2026, 11, 29), ""),
        ("what happened in May", (2026, 5, 1), (2026, 5, 31), "what happened"),
        ("what did you eat on June 3rd?", (2026, 6, 3), (2026, 6, 3), "what did you eat ?"),
        ("the trip on May 3", (2026, 5, 3), (2026, 5, 3), "the trip"),
        ("since March 3, 2026 or so", (2026, 3, 3), (2026, 3, 3), "since or so"),
        ("the party in December 2025", (2025, 12, 1), (2025, 12, 31), "the party"),
        ("last month's concert", (2026, 11, 1), (2026, 11, 30), "'s concert"),
        ("what did I say last Friday", (2026, 11, 27), (2026, 11, 27), "what did I say"),
        ("what did we plan on Tuesday", (2026, 12, 1), (2026, 12, 1), "what did we plan"),
        ("movies last night", (2026, 12, 3), (2026, 12, 3), "movies"),
        ("the hike in 2025", (2025, 1, 1), (2025, 12, 31), "the hike"),
        ("notes from 2026-05-03", (2026, 5, 3), (2026, 5, 3), "notes from"),
        # a whole date after "in" is that day, not its year; a year-month stays the year
        ("what happened in 2026-05-03?", (2026, 5, 3), (2026, 5, 3), "what happened in ?"),
        ("during 2025-12", (2025, 1, 1), (2025, 12, 31), "-12"),
        # two phrases: from the earliest day to the latest
        ("between yesterday and last Tuesday", (2026, 12, 1), (2026, 12, 3), "between and"),
    ],
)
def test_time_words_name_a_window_and_leave_the_text(
    query: str, first: tuple[int, int, int], last: tuple[int, int, int], rest: str
) -> None:
    window = find_window(query, NOW)
    assert window is not None
    assert (window.since, window.until) == (_day(*first), _day(*last) + DAY - 1)
    assert window.rest == rest


@pytest.mark.parametrize(
    "query",
    [
        "May I ask you something?",
        "wait a second",
        "what are you doing now",
        "how was your day today",
        "we should play something tonight",
        "what did we do at the lake",
        "we went to the market",  # dateparser alone reads "we" as Wednesday
        "Friday is my favourite word",
        "march forward",
        "",
    ],
)
def test_ordinary_words_are_no_window(query: str) -> None:
    assert find_window(query, NOW) is None


def test_the_window_moves_with_now() -> None:
    window = find_window("yesterday", _day(2026, 1, 1) + 3_600_000)
    assert window is not None
    assert window.since == _day(2025, 12, 31)
    # "in May" in January is last year's May: dates are read as past
    may = find_window("in May", _day(2026, 1, 10))
    assert may is not None and may.since == _day(2025, 5, 1)


@pytest.mark.parametrize(
    ("query", "phrases"),
    [
        ("you may 2-step if you like", None),
        ("since May", None),  # a start, not a window: not read
        ("on February 31st", None),  # no such day: dateparser reads nothing
        ("the party May 2", ("May 2",)),
        ("on the 3rd of May", ("of May",)),
        ("YESTERDAY", ("YESTERDAY",)),
    ],
)
def test_edges_of_the_vocabulary(query: str, phrases: tuple[str, ...] | None) -> None:
    window = find_window(query, NOW)
    assert (window.phrases if window else None) == phrases


MAX_MS = 253_402_300_799_999  # /retrieve's largest `now`: 9999-12-31T23:59:59.999Z


@pytest.mark.parametrize("now", [0, MAX_MS])
@pytest.mark.parametrize(
    "query", ["this week", "this weekend", "999 years ago", "in 1900", "last weekend", "in May"]
)
def test_the_ends_of_time_give_a_window_or_none_never_an_error(now: int, query: str) -> None:
    window = find_window(query, now)
    assert window is None or window.since <= window.until


def test_only_ascii_digits_are_read() -> None:
    assert find_window("in 20٢٥", NOW) is None  # Arabic-Indic digits
    assert find_window("٣ days ago", NOW) is None


def test_a_query_of_many_time_words_reads_only_a_few(monkeypatch: pytest.MonkeyPatch) -> None:
    """dateparser costs 0.4 to 15 ms a phrase: 8,000 characters of distinct time words ("1 days
    ago 2 days ago ...") took 1.4 s of CPU under the GIL, stalling every other recall. At most
    MAX_PHRASES distinct phrases are read (a repeated one once); all of them leave the text."""
    read: list[str] = []
    span = time_words._span
    monkeypatch.setattr(time_words, "_span", lambda p, now: read.append(p) or span(p, now))
    query = "what did we do " + " ".join(f"{n} days ago" for n in range(1, 600))
    assert len(query) < 8000  # MEMORY_POOL_MAX_QUERY_CHARS
    window = find_window(query, NOW)
    assert window is not None and len(read) == time_words.MAX_PHRASES
    assert window.rest == "what did we do" and len(window.phrases) > 500
    # the first phrases are the ones read: 1 to MAX_PHRASES days ago
    assert (window.since, window.until) == (
        _day(2026, 12, 3) - (time_words.MAX_PHRASES - 1) * DAY,
        _day(2026, 12, 3) + DAY - 1,
    )
    read.clear()
    assert find_window("yesterday, YESTERDAY and yesterday " * 100, NOW) is not None
    assert read == ["yesterday"]

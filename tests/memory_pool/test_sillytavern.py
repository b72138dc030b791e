"""Golden tests of SillyTavern chat parsing: send dates, header, speakers, ids, bad lines."""

from __future__ import annotations

import json

import pytest

from memory_pool.sillytavern import (
    ChatHeader,
    ChatMessage,
    LineProblem,
    id_character,
    message_id,
    parse_chat,
    parse_send_date,
    stqm_timestamp,
    user_speaker,
)

HEADER = {
    "user_name": "unused",
    "character_name": "unused",
    "create_date": "x",
    "chat_metadata": {},
}


@pytest.mark.parametrize(
    ("send_date", "ms"),
    [
        (1720747897123, 1720747897123),  # epoch ms
        (1720747897123.0, 1720747897123),
        (1720747897, 1720747897000),  # epoch seconds, as st-qdrant-memory reads them
        (1720747897.5, 1720747897500),
        ("1720747897123", 1720747897123),  # a numeric string means the same instant
        ("2023-5-20 @15h 30m 45s 123ms", 1684596645123),  # older SillyTavern, read as UTC
        ("2023-5-20 @9h 5m 7s 5ms", 1684573507005),  # unpadded: 5ms is 5 ms
        ("2024-07-12@01h31m37s123ms", 1720747897123),  # newer SillyTavern, read as UTC
        ("June 19, 2023 2:20pm", 1687184400000),
        ("June 19, 2023 2:20 PM", 1687184400000),
        ("October 20, 2025 12:16pm", 1760962560000),  # 12 pm is noon
        ("Jan 1, 2024 12:05am", 1704067500000),  # 12 am is midnight
        ("2025-11-23T10:00:00.000Z", 1763892000000),
        ("2024-07-12T03:31:37.123+02:00", 1720747897123),  # the offset is honoured
        ("2024-07-12T01:31:37.123", 1720747897123),  # no offset: UTC
        ("2024-07-12", 1720742400000),
        ("  2024-07-12@01h31m37s123ms ", 1720747897123),
    ],
)
def test_every_send_date_form_parses_to_exact_ms(send_date: object, ms: int) -> None:
    assert parse_send_date(send_date) == ms


@pytest.mark.parametrize(
    "send_date",
    [None, "", "  ", "yesterday", "Feb 30, 2024 1:00pm", "Smarch 1, 2024 1:00pm",
     "2024-13-01@01h00m00s0ms", "June 19, 2023 13:20pm", True, 0, 1_000_000_000,
     1_000_000_000_000, float("nan"), float("inf"), [1720747897123], {"ms": 1}],
)  # fmt: skip
def test_an_unreadable_send_date_is_none_never_now(send_date: object) -> None:
    assert parse_send_date(send_date) is None


@pytest.mark.parametrize(
    ("send_date", "stamp"),
    [
        (1720747897123, "1720747897123"),
        (1720747897, "1720747897000"),
        (1720747897.5, "1720747897500"),
        (1720747897123.5, "1720747897123.5"),  # JavaScript keeps the fraction in the string
        ("2025-11-23T10:00:00.000Z", "1763892000000"),
        ("2024-07-12T03:31:37.123+02:00", "1720747897123"),
        ("2024-07-12", "1720742400000"),  # date-only ISO is UTC in JavaScript
        # st-qdrant-memory fell back to Date.now() or to the browser's zone: not reproducible
        ("2024-07-12T01:31:37.123", None),
        ("2023-5-20 @15h 30m 45s 123ms", None),
        ("2024-07-12@01h31m37s123ms", None),
        ("June 19, 2023 2:20pm", None),
        ("1720747897123", None),
        (" 2025-11-23T10:00:00.000Z", None),
        (1_000_000_000_000, None),
        (1_000_000_000, None),
        (0, None),
        (None, None),
        (True, None),
    ],
)
def test_st_qdrant_memory_timestamp_only_where_it_is_reproducible(
    send_date: object, stamp: str | None
) -> None:
    assert stqm_timestamp(send_date) == stamp


def _lines(*records: object) -> list[str]:
    return [r if isinstance(r, str) else json.dumps(r) for r in records]


def test_header_is_index_0_and_unused_names_are_none() -> None:
    chat = parse_chat("c.jsonl", _lines(HEADER, {"mes": "hi there", "is_user": True}))
    assert chat.header == ChatHeader(None, None)
    assert [(m.line, m.index) for m in chat.messages] == [(2, 1)]
    named = {**HEADER, "user_name": " Robin ", "character_name": "Seraphina"}
    assert parse_chat("c.jsonl", _lines(named)).header == ChatHeader("Robin", "Seraphina")
    assert parse_chat("c.jsonl", _lines({**HEADER, "user_name": "UNUSED"})).header.user_name is None


def test_a_file_without_header_starts_its_messages_at_index_0() -> None:
    chat = parse_chat("c.jsonl", _lines({"mes": "first words", "send_date": 1720747897123}))
    assert chat.header == ChatHeader()
    assert chat.messages[0].index == 0


def test_message_fields_mes_trimmed_swipes_ignored_system_kept_for_the_caller() -> None:
    records = (
        HEADER,
        {"name": "A", "is_user": True, "is_system": False, "send_date": 1720747897123,
         "mes": "  chosen text \n", "swipes": ["other", "chosen text"], "swipe_id": 1},
        {"name": "S", "is_user": False, "is_system": True, "send_date": "bad", "mes": "note"},
        {"name": "B", "is_user": False, "send_date": 1720747897124, "mes": None},
    )  # fmt: skip
    chat = parse_chat("c.jsonl", _lines(*records))
    assert chat.messages == (
        ChatMessage(2, 1, True, False, "chosen text", 1720747897123, 1720747897123),
        ChatMessage(3, 2, False, True, "note", "bad", None),
        ChatMessage(4, 3, False, False, "", 1720747897124, 1720747897124),
    )
    assert chat.problems == ()


def test_bad_lines_are_reported_with_their_line_and_take_no_index() -> None:
    lines = _lines(
        HEADER,
        "{not json",
        "",
        {"mes": "kept one", "send_date": 1720747897123},
        "NaN",
        "null",  # falsy in JavaScript: SillyTavern drops it silently
        ["a list"],
        {"no": "mes"},
        {"mes": "kept two", "send_date": 1720747897123},
    )
    chat = parse_chat("c.jsonl", lines)
    assert [(m.line, m.index, m.text) for m in chat.messages] == [
        (4, 1, "kept one"),
        (9, 4, "kept two"),
    ]
    assert [p.line for p in chat.problems] == [2, 5, 7, 8]
    assert chat.problems[0].reason.startswith("not JSON")
    assert chat.problems[3] == LineProblem(8, "not a chat message (no `mes`)")


@pytest.mark.parametrize(
    ("persona", "header", "aliases", "speaker"),
    [
        ("Alex", ChatHeader("Robin", None), {"1": "Sam"}, "Alex"),  # --persona wins
        (None, ChatHeader("Robin", None), {"1": "Sam"}, "Robin"),  # then the file's user_name
        (None, ChatHeader(None, None), {"1": "Sam"}, "Sam"),  # then the agent's only alias
        (None, ChatHeader(None, None), {"1": "Sam", "2": "Sam"}, "Sam"),  # one person, two ids
        (None, ChatHeader(None, None), {"1": "Sam", "2": "Kim"}, "User"),
        (None, ChatHeader(None, None), {}, "User"),
        ("  ", ChatHeader(None, None), {}, "User"),
    ],
)
def test_user_speaker(
    persona: str | None, header: ChatHeader, aliases: dict[str, str], speaker: str
) -> None:
    assert user_speaker(persona, header, aliases) == speaker


def test_id_character_is_the_header_name_else_the_agent() -> None:
    assert id_character(ChatHeader(None, "Seraphina"), "Sera") == "Seraphina"
    assert id_character(ChatHeader(None, None), "Sera") == "Sera"


@pytest.mark.parametrize(
    ("send_date", "expected"),
    [
        (1720747897123, "Seraphina_1720747897123_2"),
        (1720747897, "Seraphina_1720747897000_2"),
        ("2025-11-23T10:00:00.000Z", "Seraphina_1763892000000_2"),
        ("2024-07-12@01h31m37s123ms", "st:Seraphina - chat.jsonl:4"),
        ("June 19, 2023 2:20pm", "st:Seraphina - chat.jsonl:4"),
        ("2024-07-12T01:31:37.123", "st:Seraphina - chat.jsonl:4"),
    ],
)
def test_message_id_forms(send_date: object, expected: str) -> None:
    lines = _lines(
        HEADER,
        {"mes": "one", "send_date": 1720747897000},
        "oops",
        {"mes": "two", "send_date": send_date},
    )
    chat = parse_chat("Seraphina - chat.jsonl", lines)
    assert message_id(chat, chat.messages[1], "Seraphina") == expected

"""Imported message ids are always storable, whatever the character or file is called."""

from __future__ import annotations

import json

import pytest

from memory_pool.importer import BAD_DATE, Summary, plan_chat
from memory_pool.sillytavern import ChatFile, message_id, parse_chat
from shared.agents import AgentConfig
from shared.format.ids import message_id_problem

HEADER = {"user_name": "unused", "character_name": "unused", "create_date": "x"}


def chat(character: str | None, send_date: object, name: str = "chat.jsonl") -> ChatFile:
    header = {**HEADER, "character_name": character or "unused"}
    lines = [json.dumps(header), json.dumps({"mes": "hello there", "send_date": send_date})]
    return parse_chat(name, lines)


@pytest.mark.parametrize(
    ("character", "send_date", "file", "expected"),
    [
        ("Seraphina", 1720747897123, "c.jsonl", "Seraphina_1720747897123_1"),
        ("Dr. Who? (v2)", 1720747897123, "c.jsonl", "Dr. Who? (v2)_1720747897123_1"),
        ("Smith, Jr.", 1720747897123, "c.jsonl", "Smith%2C Jr._1720747897123_1"),
        ("Smith, Jr.", "June 19, 2023 2:20pm", "a, b.jsonl", "st:a%2C b.jsonl:2"),
    ],
)
def test_ids_are_st_qdrant_memory_s_where_storable_and_escaped_otherwise(
    character: str, send_date: object, file: str, expected: str
) -> None:
    parsed = chat(character, send_date, file)
    mid = message_id(parsed, parsed.messages[0], parsed.header.character_name or "x")
    assert mid == expected
    assert message_id_problem(mid) is None


def test_a_very_long_character_name_is_hashed_to_a_storable_id() -> None:
    parsed = chat("N" * 300, 1720747897123)
    mid = message_id(parsed, parsed.messages[0], "N" * 300)
    assert message_id_problem(mid) is None and len(mid) == 256


def test_dates_outside_the_storable_years_are_skipped_with_their_line() -> None:
    summary = Summary()
    agent = AgentConfig(name="mythos")
    for send_date in ("0001-01-01T00:00:00Z", 1718000000000000):
        assert plan_chat(chat("Mythos", send_date), agent, None, summary) == []
    assert summary.skipped[BAD_DATE] == 2
    assert summary.problems == [
        "chat.jsonl:2: outside the years 1970-9999: send_date '0001-01-01T00:00:00Z'",
        "chat.jsonl:2: outside the years 1970-9999: send_date 1718000000000000",
    ]

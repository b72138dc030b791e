"""Golden tests of the identifier rules and the clean-up of names and text (format/ids.py)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.format.ids import (
    MAX_ID_CHARS,
    MAX_NAME_CHARS,
    clean_text,
    id_problem,
    message_id_problem,
    one_line_name,
    replace_surrogates,
    shown,
    storable_id,
)

REAL_IDS = [
    "1250000000000000001",
    "self-3-1",
    "hermes:0b6f2a1e-77f3-4c1e-9d41-1c2f3a4b5c6d:17:assistant",
    "Seraphina_1718000000000_3",
    "Dr. Smith the Third_1718000000000.5_12",
    "雪乃 (ゆきの)_1718000000000_1",
    "st:chat 2024-5-20@15h30m.jsonl:4",
    "x" * MAX_ID_CHARS,
]


@pytest.mark.parametrize("mid", REAL_IDS)
def test_real_clients_ids_are_storable(mid: str) -> None:
    assert message_id_problem(mid) is None
    assert storable_id(mid) == mid


@pytest.mark.parametrize(
    ("mid", "problem"),
    [
        ("", "is empty"),
        ("x,y", "contains a comma (messageIds are comma-separated)"),
        (" s1", "has leading or trailing whitespace"),
        ("s1\u00a0", "has leading or trailing whitespace"),
        ("a\tb", "contains a control character"),
        ("a\x85b", "contains a control character"),
        ("a\ud800", "contains a lone surrogate (not valid Unicode)"),
        ("x" * 257, "is 257 characters long; the limit is 256"),
    ],
)
def test_unstorable_message_ids(mid: str, problem: str) -> None:
    assert message_id_problem(mid) == problem


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("discord:123:456", None),
        ("a, b", None),  # other ids are never comma-joined
        (" c1 ", None),
        ("c" * 257, "is 257 characters long; the limit is 256"),
        ("c\n1", "contains a control character"),
    ],
)
def test_other_ids(value: str, problem: str | None) -> None:
    assert id_problem(value) == problem


@pytest.mark.parametrize(
    ("raw", "derived"),
    [
        ("Smith, Jr._1718000000000_3", "Smith%2C Jr._1718000000000_3"),
        ("100%, really_1_2", "100%25%2C really_1_2"),
        (" Nyx_1_2", "%20Nyx_1_2"),
        ("Nyx_1_2\u3000", "Nyx_1_2%u3000"),
        ("bell\x07_1_2", "bell%07_1_2"),
        ("half\ud800_1_2", "half%uD800_1_2"),
    ],
)
def test_derived_ids_escape_what_cannot_be_stored(raw: str, derived: str) -> None:
    assert storable_id(raw) == derived
    assert message_id_problem(derived) is None


def test_derived_ids_over_the_cap_end_in_a_hash() -> None:
    one, other = storable_id("a," * 200 + "1"), storable_id("a," * 200 + "2")
    assert len(one) == MAX_ID_CHARS and one != other
    assert one.startswith("a%2Ca%2C") and one[-17] == "~"
    assert message_id_problem(one) is None
    assert storable_id("a," * 200 + "1") == one  # stable
    assert message_id_problem(storable_id("")) is None


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("Alex", "Alex"),
        ("  Alex\n", "Alex"),
        ("Alex\nMythos: hi", "Alex Mythos: hi"),
        ("A\x00\x1b[31mB", "A [31mB"),
        ("A\u2028B", "A B"),
        ("A\ud800", "A\ufffd"),
        ("n" * 129, "n" * 128),
        ("x" * 127 + " yz", "x" * 127),
        ("\n\t", ""),
    ],
)
def test_speaker_names_are_one_line(given: str, expected: str) -> None:
    assert one_line_name(given) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("two\nlines\tand a tab\r\n", "two\nlines\tand a tab\r\n"),
        ("nul\x00 bell\x07 esc\x1b del\x7f nel\x85", "nul bell esc del nel"),
        ("lone \ud800 and \udfff", "lone \ufffd and \ufffd"),
        ("emoji 😀 stays", "emoji 😀 stays"),
    ],
)
def test_text_keeps_lines_and_loses_controls(text: str, expected: str) -> None:
    assert clean_text(text) == expected


def test_shown_values_are_encodable_and_short() -> None:
    assert shown("a\ud800") == "a\ufffd"
    assert shown("x" * 100) == "x" * 64 + "…"
    shown("\udfff" * 1000).encode("utf-8")
    assert replace_surrogates("ok") == "ok"


# The rules as first written, all regexes: the fast paths for plain ids, text and names must
# answer exactly the same for any string.
def _reference_id_problem(value: str, max_chars: int = MAX_ID_CHARS) -> str | None:
    if len(value) > max_chars:
        return f"is {len(value)} characters long; the limit is {max_chars}"
    if re.search(r"[\x00-\x1f\x7f-\x9f]", value):
        return "contains a control character"
    if re.search(r"[\ud800-\udfff]", value):
        return "contains a lone surrogate (not valid Unicode)"
    return None


def _reference_clean_text(text: str) -> str:
    return re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", "", replace_surrogates(text))


def _reference_one_line_name(name: str) -> str:
    flat = re.sub(r"[\s\x00-\x1f\x7f-\x9f]+", " ", replace_surrogates(name)).strip()
    return flat[:MAX_NAME_CHARS].rstrip()


ANY_TEXT = st.text(alphabet=st.characters(codec=None), max_size=300) | st.sampled_from(
    ["1234567890", "a" * 257, "Ann  Lee", " Ann ", "Zoë", "x\u2028y", "\ud800", "a\tb", ""]
)


@settings(max_examples=500, deadline=None)
@given(ANY_TEXT)
def test_the_fast_paths_answer_as_the_regexes_do(value: str) -> None:
    assert id_problem(value) == _reference_id_problem(value)
    assert clean_text(value) == _reference_clean_text(value)
    assert one_line_name(value) == _reference_one_line_name(value)

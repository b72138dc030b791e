"""JSON Lines: written with the line breaks JSON leaves raw escaped, read at "\\n" alone."""

from __future__ import annotations

import json

import pytest

from shared.format.json_lines import escape_line_breaks, split_lines

BREAKS = "a\u2028b\u2029c\x85d"


def test_escaped_line_breaks_read_back_as_the_same_value() -> None:
    line = escape_line_breaks(json.dumps({BREAKS: BREAKS}, ensure_ascii=False))
    assert line.splitlines() == [line]
    assert json.loads(line) == {BREAKS: BREAKS}


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_lines_split_at_newline_alone_whatever_the_chunks(size: int) -> None:
    text = f'{{"a":"{BREAKS}"}}\n\n{{"b":1}}\r\n{{"c":"\r"}}\nlast'
    chunks = [text[i : i + size] for i in range(0, len(text), size)]
    assert list(split_lines(chunks)) == [f'{{"a":"{BREAKS}"}}', "", '{"b":1}', '{"c":"\r"}', "last"]
    assert list(split_lines([text + "\n"])) == list(split_lines([text]))
    assert list(split_lines([])) == list(split_lines([""])) == []

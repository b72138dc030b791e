"""JSON Lines as memory-pool writes and reads them (exports, JSON logs): one JSON value a line,
each line ended by "\\n". json.dumps(ensure_ascii=False) leaves U+0085, U+2028 and U+2029 raw
inside strings, and str.splitlines() (httpx's iter_lines() alike) breaks a line at each of them:
they are written escaped, and lines are read at "\\n" alone (a file written before they were
escaped, or by another tool, may hold them raw)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def escape_line_breaks(json_text: str) -> str:
    """JSON text with the line breaks JSON leaves raw escaped: inside its strings, the only
    place json.dumps can have put them, so the value read back is the same."""
    return json_text.translate(_LINE_BREAKS)


def split_lines(chunks: Iterable[str]) -> Iterator[str]:
    """The lines of a text arriving in chunks, split at "\\n" alone (a "\\r" before it goes
    too), without their ends; a last line without an end is a line."""
    pending: list[str] = []
    for chunk in chunks:
        *ended, rest = chunk.split("\n")
        if ended:
            ended[0] = "".join([*pending, ended[0]])
            pending = []
            yield from (line.removesuffix("\r") for line in ended)
        if rest:
            pending.append(rest)
    if pending:
        yield "".join(pending).removesuffix("\r")

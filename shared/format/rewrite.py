"""Rebuilding a stored chunk after an edit or a delete, as a pure rule: which of its messages
stay, and with what text."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from shared.format.chunking import ChunkRules, is_storable
from shared.format.messages import Message


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A chunk's messages after the change; `emptied` are the messages an edit to a short text
    took out (kept to bring back if the text grows again)."""

    messages: tuple[Message, ...]
    emptied: tuple[Message, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.messages


def rewritten(
    messages: Sequence[Message],
    rules: ChunkRules,
    *,
    texts: Mapping[str, str] | None = None,
    dropped: Collection[str] = (),
) -> Rewrite:
    """`messages` with each id in `texts` given its new text (an edit changes text only: the
    speaker, time and ids stay) and the ids in `dropped` left out. A new text too short to
    store takes its message out as well."""
    texts = texts or {}
    kept: list[Message] = []
    emptied: list[Message] = []
    for message in messages:
        if message.id in dropped:
            continue
        text = texts.get(message.id)
        if text is None:
            kept.append(message)
        elif is_storable(text, rules):
            kept.append(replace(message, text=text))
        else:
            emptied.append(message)
    return Rewrite(tuple(kept), tuple(emptied))

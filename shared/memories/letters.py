"""Changing a dead letter's chunk (an edit's new text, a delete's missing messages) as a pure
rule, as a stored chunk is rewritten: the letter keeps its other messages, its point id unless
that came from a message that left, and goes when nothing is left."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

from shared.format.chunking import ChunkRules
from shared.format.payload import chunk_payload, context_of, messages_of
from shared.format.rewrite import Rewrite, rewritten
from shared.memories.rewrites import ChunkChange, target_id
from shared.state.dead_letters import DeadLetter


@dataclass(frozen=True, slots=True)
class LetterChange:
    """What a letter becomes: `letter` None when no message is left."""

    letter: DeadLetter | None
    rewrite: Rewrite


def changed_letter(
    letter: DeadLetter,
    rules: ChunkRules,
    *,
    texts: Mapping[str, str] | None = None,
    dropped: Collection[str] = (),
) -> LetterChange | None:
    """The letter with the new `texts` and without `dropped`; None when it cannot be rebuilt
    (a letter of a chunk written before chunks kept their messages)."""
    messages = messages_of(letter.payload)
    if messages is None:
        return None
    change = rewritten(messages, rules, texts=texts, dropped=dropped)
    if change.empty:
        return LetterChange(None, change)
    payload = chunk_payload(change.messages, context_of(letter.payload))
    point = target_id(letter.collection, ChunkChange(letter.point_id, letter.payload, messages,
                                                     change))  # fmt: skip
    return LetterChange(replace(letter, payload=payload, point_id=point), change)

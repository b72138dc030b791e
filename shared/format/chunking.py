"""The chunker: one pure rule that cuts a conversation's messages, in arrival order, into chunks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from shared.format.messages import Message


@dataclass(frozen=True, slots=True)
class ChunkRules:
    """How big a chunk may grow and when it closes (the issue's measured defaults)."""

    max_chars: int = 800
    min_chars: int = 500
    min_messages: int = 2
    gap_seconds: float = 6 * 3600
    min_message_chars: int = 5


@dataclass(frozen=True, slots=True)
class Chunking:
    """The result of cutting: closed chunks, then the still-open tail (possibly empty)."""

    closed: tuple[tuple[Message, ...], ...]
    open: tuple[Message, ...]


def is_storable(text: str, rules: ChunkRules) -> bool:
    """Whether a message is long enough to store; shorter ones are counted as skipped."""
    return len(text.strip()) >= rules.min_message_chars


def _closes_before(size: int, newest_ts: int, message: Message, rules: ChunkRules) -> bool:
    """Close the non-empty chunk before adding `message`: it would overflow or jump in time."""
    if size + message.size > rules.max_chars:
        return True
    # The gap rule keeps a chunk's date honest: a reply six hours later starts a new chunk.
    return message.ts - newest_ts > rules.gap_seconds * 1000


def _closes_after(size: int, count: int, last: Message, rules: ChunkRules) -> bool:
    """Close the chunk after adding `last`: it is big enough, unless a question awaits its reply."""
    if size < rules.min_chars or count < rules.min_messages:
        return False
    return not last.text.endswith("?")


def cut(messages: Iterable[Message], rules: ChunkRules) -> Chunking:
    """Cut messages (arrival order) into chunks.

    Greedy and left to right, so cutting a prefix and then continuing from its open tail gives
    the same chunks as cutting the whole sequence at once: the live pipeline and imports agree
    however the messages arrived in batches.
    """
    closed: list[tuple[Message, ...]] = []
    current: list[Message] = []
    size = 0
    newest_ts = 0
    for message in messages:
        if current and _closes_before(size, newest_ts, message, rules):
            closed.append(tuple(current))
            current, size = [], 0
        current.append(message)
        size += message.size
        newest_ts = message.ts if len(current) == 1 else max(newest_ts, message.ts)
        if _closes_after(size, len(current), message, rules):
            closed.append(tuple(current))
            current, size = [], 0
    return Chunking(closed=tuple(closed), open=tuple(current))


def chunk_size(messages: Sequence[Message]) -> int:
    """The chunker's size of a group of messages."""
    return sum(message.size for message in messages)

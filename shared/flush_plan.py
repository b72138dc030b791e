"""What a flush writes, as a pure rule: closed chunks always, the open chunk once it is idle."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shared.chunking import ChunkRules, chunk_size, cut
from shared.messages import Message


@dataclass(frozen=True, slots=True)
class ChunkWrite:
    """One chunk to embed and upsert; an open one stays in the buffer to grow."""

    messages: tuple[Message, ...]
    closed: bool


@dataclass(frozen=True, slots=True)
class FlushPlan:
    writes: tuple[ChunkWrite, ...]
    consumed: int  # leading buffer messages that leave it: the closed chunks
    consumed_chars: int
    open_count: int
    open_chars: int
    written_after: int  # messages of the open chunk that are stored as they are after this flush


def plan_flush(
    messages: Sequence[Message],
    rules: ChunkRules,
    *,
    written: int,
    quiet_for_seconds: float,
    idle_seconds: float | None,
    force: bool,
) -> FlushPlan:
    """Plan one conversation's flush from its buffer (which always starts a chunk).

    `written` is how many buffered messages the last write of the open chunk covered; the open
    chunk is rewritten only when it changed. `idle_seconds` None means no idle timer (imports).
    """
    result = cut(messages, rules)
    open_chunk = result.open
    unchanged = bool(open_chunk) and not result.closed and written == len(open_chunk)
    idle = idle_seconds is not None and quiet_for_seconds >= idle_seconds
    write_open = bool(open_chunk) and not unchanged and (idle or force)
    writes = [ChunkWrite(chunk, closed=True) for chunk in result.closed]
    if write_open:
        writes.append(ChunkWrite(open_chunk, closed=False))
    return FlushPlan(
        writes=tuple(writes),
        consumed=result.closed_message_count,
        consumed_chars=sum(chunk_size(chunk) for chunk in result.closed),
        open_count=len(open_chunk),
        open_chars=chunk_size(open_chunk),
        written_after=len(open_chunk) if (write_open or unchanged) else 0,
    )

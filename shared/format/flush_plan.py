"""What a flush writes, as a pure rule: closed chunks always, the open chunk once it is idle."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shared.format.chunking import ChunkRules, chunk_size, cut
from shared.format.messages import Message

# Imports have no idle timer: the importer's final flush writes each file's last chunk. This
# long one is only a safety net for an import that died before that flush.
IMPORT_IDLE_SECONDS = 3600.0


def idle_seconds(agent_idle_seconds: float, *, idle_timer: bool) -> float:
    """How long a conversation's open chunk waits for more before it is written: the agent's
    idle time, or for an import (no idle timer of its own) the safety net above. The one home
    of this rule: /save stores it as the due time (the scripts read that number), a flush
    plans with it."""
    return agent_idle_seconds if idle_timer else IMPORT_IDLE_SECONDS


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
    max_closed: int | None = None,
) -> FlushPlan:
    """Plan one conversation's flush from its buffer (which always starts a chunk).

    `written` is how many leading buffered messages the stored point of the open chunk covers;
    the open chunk is rewritten only when it changed. `idle_seconds` None means no idle timer.
    `max_closed` caps the closed chunks taken in one flush (the rest stay buffered, in order).
    """
    result = cut(messages, rules)
    closed = result.closed if max_closed is None else result.closed[:max_closed]
    if len(closed) < len(result.closed):
        # Only a slice of a backlog: the open chunk waits for the flush that reaches it.
        # open_count 0 tells the commit that more than an open chunk is left: due again now.
        return _plan(closed, (), written_after=0, open_count=0)
    open_chunk = result.open
    unchanged = bool(open_chunk) and not closed and written == len(open_chunk)
    idle = idle_seconds is not None and quiet_for_seconds >= idle_seconds
    write_open = bool(open_chunk) and not unchanged and (idle or force)
    if write_open or unchanged:
        written_after = len(open_chunk)
    elif not closed:
        # Nothing consumed and the open chunk not rewritten: its stored point still covers
        # the same leading messages, and deletes rely on knowing that.
        written_after = min(written, len(open_chunk))
    else:
        written_after = 0
    return _plan(closed, open_chunk if write_open else (), written_after, len(open_chunk),
                 open_chars=chunk_size(open_chunk))  # fmt: skip


def _count(chunks: Sequence[Sequence[Message]]) -> int:
    return sum(len(chunk) for chunk in chunks)


def _plan(
    closed: Sequence[tuple[Message, ...]],
    open_write: tuple[Message, ...],
    written_after: int,
    open_count: int,
    open_chars: int = 0,
) -> FlushPlan:
    writes = [ChunkWrite(chunk, closed=True) for chunk in closed]
    if open_write:
        writes.append(ChunkWrite(open_write, closed=False))
    return FlushPlan(
        writes=tuple(writes),
        consumed=_count(closed),
        consumed_chars=sum(chunk_size(chunk) for chunk in closed),
        open_count=open_count,
        open_chars=open_chars,
        written_after=written_after,
    )

"""An agent's dedupe state in Redis, read and restored for moving a pool: tombstones (deleted
message ids, kept for ever) and dedupe marks (ids seen recently, with their expiry)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

import redis

from shared.pool.format import DedupeMark, Tombstone
from shared.state import keys
from shared.state.buffers import unwritten_messages as buffered_unwritten
from shared.state.scripts import SOURCES
from shared.state.text import as_text

SCAN_BATCH = 500
SCRATCH_SECONDS = 6 * 3600  # a crashed export leaves its scratch set for this long at most

# A tombstone always wins; a mark is written where none is, or gets the later expiry of the
# two. ARGV: now (ms), then per key: value, expiry (Unix ms). Redis 6.0 commands only.
_RESTORE = SOURCES["marks_restore"]


def _parse(prefix: str, key: str) -> tuple[str, str] | None:
    """(source, message id) of a marker key; None for a key of another shape."""
    rest = key[len(prefix) :].split(":")
    if len(rest) != 2:
        return None
    return unquote(rest[0]), unquote(rest[1])


@dataclass
class MarkSnapshot:
    """An agent's marker keys in key order; the counts are as the snapshot found them."""

    redis: redis.Redis
    prefix: str
    scratch: str
    tombstones: int
    dedupe: int

    def __iter__(self) -> Iterator[Tombstone | DedupeMark]:
        """Every marker still there, a page at a time; the scratch set is removed at the end."""
        start = "-"
        try:
            while True:
                page = [
                    as_text(k)
                    for k in self.redis.zrangebylex(self.scratch, start, "+", 0, SCAN_BATCH)
                ]
                if not page:
                    return
                start = f"({page[-1]}"
                yield from self._read(page)
        finally:
            self.redis.delete(self.scratch)

    def _read(self, page: list[str]) -> Iterator[Tombstone | DedupeMark]:
        pipe = self.redis.pipeline(transaction=False)
        pipe.time()
        for key in page:
            pipe.get(key)
            pipe.pttl(key)
        replies = pipe.execute()
        seconds, micros = replies[0]
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        for n, key in enumerate(page):
            value, left = replies[1 + 2 * n], int(replies[2 + 2 * n])
            parsed = _parse(self.prefix, key)
            if value is None or parsed is None or left == -2:
                continue  # expired meanwhile, or not a marker
            source, message_id = parsed
            if left == -1:
                yield Tombstone(source, message_id)
            else:
                # whole seconds, rounded: the same second on every export of one mark
                yield DedupeMark(source, message_id, round((now_ms + left) / 1000), as_text(value))


class RedisMarks:
    def __init__(self, client: redis.Redis) -> None:
        self.redis = client
        self._restore = client.register_script(_RESTORE)

    def snapshot(self, collection: str) -> MarkSnapshot:
        """The agent's marker keys gathered into a sorted set in Redis (one SCAN pass, constant
        memory here), so they can be read back in key order: SCAN's own order depends on the
        Redis it runs in, and an export must be the same bytes wherever it is made."""
        prefix = keys.seen_prefix(collection)
        scratch = f"{keys.PREFIX}export:{uuid.uuid4().hex}"
        tombstones = dedupe = 0
        cursor: int = 0
        while True:
            cursor, found = self.redis.scan(cursor, match=f"{prefix}*", count=SCAN_BATCH)
            if found:
                pipe = self.redis.pipeline(transaction=False)
                pipe.zadd(scratch, {as_text(key): 0 for key in found})
                pipe.expire(scratch, SCRATCH_SECONDS)
                for key in found:
                    pipe.pttl(key)
                for left in pipe.execute()[2:]:
                    if int(left) == -1:
                        tombstones += 1
                    elif int(left) >= 0:
                        dedupe += 1
            if int(cursor) == 0:
                break
        return MarkSnapshot(self.redis, prefix, scratch, tombstones, dedupe)

    def record_agent(self, collection: str, name: str) -> None:
        """The agent's name for its collection, unless one is recorded (the first wins, as on
        /save): what lists an agent that has not saved anything yet."""
        self.redis.hsetnx(keys.NAMES, collection, name)

    def restore(
        self, collection: str, marks: Sequence[Tombstone | DedupeMark], now_ms: int
    ) -> None:
        """Writes the marks under `collection`: a tombstone stays for ever; a dedupe mark keeps
        its expiry, the later one where the target has the mark already."""
        if not marks:
            return
        marker_keys: list[str] = []
        args: list[str | int] = [now_ms]
        for mark in marks:
            marker_keys.append(keys.seen(collection, mark.source, mark.message_id))
            if isinstance(mark, Tombstone):
                args.extend([keys.TOMBSTONE, -1])
            else:
                args.extend([mark.value, mark.expires_at * 1000])
        self._restore(keys=marker_keys, args=args)


def unwritten_messages(
    client: redis.Redis, collection: str, *, skip: frozenset[str] = frozenset()
) -> int:
    """An agent's buffered messages not stored in any point yet (an open chunk that is
    written counts as stored), outside the conversations in `skip`: what moving the pool now
    would leave behind."""
    members = client.smembers(keys.conversations(collection))
    conversations = [c for c in (as_text(m) for m in members) if c not in skip]
    return sum(buffered_unwritten(client, conversations))

"""Deleting buffered messages: what a delete takes out of Redis, and the tombstones it leaves."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import redis

from shared import keys
from shared.messages import Message

# Removes a conversation's matching buffered messages in one step and bumps its generation, so
# a flush already in flight sees the change before it commits (and takes its points back).
# A match inside the open chunk that is already written drops that whole chunk, as its point
# is deleted with it: "every chunk that holds it".
_FORGET = """
local mode, member, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local wanted = {}
for i = 4, #ARGV do wanted[ARGV[i]] = true end
local items = redis.call('LRANGE', KEYS[2], 0, -1)
local written = tonumber(redis.call('HGET', KEYS[1], 'written') or '0')
local function matches(raw)
  if mode == 'all' then return true end
  local m = cjson.decode(raw)
  if mode == 'ids' then return wanted[m['i']] == true end
  return m['u'] ~= nil and wanted[m['u']] == true
end
local hits, drop_written = {}, false
for idx, raw in ipairs(items) do
  hits[idx] = matches(raw)
  if hits[idx] and idx <= written then drop_written = true end
end
local removed, kept, chars = {}, {}, 0
for idx, raw in ipairs(items) do
  if hits[idx] or (drop_written and idx <= written) then
    table.insert(removed, raw)
  else
    table.insert(kept, raw)
    chars = chars + tonumber(cjson.decode(raw)['z'] or 0)
  end
end
if #removed == 0 then return {} end
redis.call('DEL', KEYS[2])
for _, raw in ipairs(kept) do redis.call('RPUSH', KEYS[2], raw) end
redis.call('HINCRBY', KEYS[1], 'gen', 1)
redis.call('HSET', KEYS[1], 'chars', chars)
-- The open chunk's stored point (if any) no longer matches the buffer: rewrite it.
redis.call('HSET', KEYS[1], 'written', 0)
-- A delete may be the fix of a quarantined conversation (its bad message gone): it leaves
-- the quarantine and is tried again; still failing, it returns there.
if redis.call('ZREM', KEYS[4], member) == 1 then
  redis.call('HDEL', KEYS[1], 'quarantined', 'quarantined_at', 'failures', 'attempts', 'retry_at')
end
if #kept == 0 then
  redis.call('ZREM', KEYS[3], member)
else
  redis.call('ZADD', KEYS[3], now, member)
end
return removed
"""


@dataclass(frozen=True, slots=True)
class BufferScope:
    """Which buffered messages of the chosen conversations go: all, these ids, or this user's."""

    mode: str  # "all" | "ids" | "user"
    values: tuple[str, ...] = ()


class BufferDeletes:
    def __init__(self, client: redis.Redis) -> None:
        self.redis = client
        self._forget = client.register_script(_FORGET)

    def forget(
        self, conversations: Iterable[str], scope: BufferScope, now_ms: int
    ) -> list[Message]:
        """Remove matching buffered messages from each conversation; returns what was removed."""
        removed: list[Message] = []
        for conversation in conversations:
            result = self._forget(
                keys=[
                    keys.meta(conversation),
                    keys.buffer(conversation),
                    keys.DUE,
                    keys.QUARANTINE,
                ],
                args=[scope.mode, conversation, now_ms, *scope.values],
            )
            removed.extend((conversation, Message.from_json(raw)) for raw in result)
        return removed

    def tombstone(
        self, collection: str, ids_by_source: Iterable[tuple[str, Iterable[str]]]
    ) -> None:
        """Deleted ids are never stored again: their dedupe markers lose their expiry."""
        pipe = self.redis.pipeline(transaction=False)
        for source, message_ids in ids_by_source:
            for message_id in message_ids:
                pipe.set(keys.seen(collection, source, message_id), "deleted")
        pipe.execute()

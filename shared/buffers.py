"""The Redis side of the write path: dedupe, conversation buffers, the due set and leases.

Every change is one Lua script, so it is atomic; the scripts keep to Redis 6.0 commands. Keys are
passed as arguments because each call touches many conversations: memory-pool needs a standalone
Redis (or one cluster slot), not Redis Cluster.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import redis
import redis.asyncio

from shared import keys
from shared.conversations import ConversationRef, collection_of
from shared.errors import AgentBlocked, UpstreamUnavailable
from shared.messages import Message

_SAVE = """
local now, ttl, groups = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local collection = ARGV[4]
local reason = redis.call('GET', KEYS[2])
if reason then return {-1, reason} end
local due, i, accepted, dups = KEYS[1], 5, 0, 0
for g = 1, groups do
  local meta, buf, convs, member = ARGV[i], ARGV[i+1], ARGV[i+2], ARGV[i+3]
  local min_chars, gap_ms, idle_ms = tonumber(ARGV[i+9]), tonumber(ARGV[i+10]), tonumber(ARGV[i+11])
  local n, agent = tonumber(ARGV[i+12]), ARGV[i+4]
  local fields = {'agent', ARGV[i+4], 'source', ARGV[i+5], 'cid', ARGV[i+6],
                  'channel', ARGV[i+7], 'guild', ARGV[i+8], 'noidle', ARGV[i+13]}
  i = i + 14
  local newest = tonumber(redis.call('HGET', meta, 'newest') or '0')
  local added, added_size, gap = 0, 0, false
  for m = 1, n do
    local seen, ts = ARGV[i], tonumber(ARGV[i+3])
    if redis.call('SET', seen, member, 'NX', 'EX', ttl) then
      redis.call('RPUSH', buf, ARGV[i+1])
      added, added_size = added + 1, added_size + tonumber(ARGV[i+2])
      if newest > 0 and ts - newest > gap_ms then gap = true end
      if ts > newest then newest = ts end
    else
      -- Seeing an id again keeps it remembered; a deleted id (no expiry) stays deleted.
      if redis.call('TTL', seen) > 0 then redis.call('EXPIRE', seen, ttl) end
      dups = dups + 1
    end
    i = i + 4
  end
  if added > 0 then
    accepted = accepted + added
    for f = 1, #fields, 2 do
      if fields[f+1] ~= '' then redis.call('HSETNX', meta, fields[f], fields[f+1]) end
    end
    redis.call('HSET', meta, 'last', now, 'newest', newest)
    local chars = redis.call('HINCRBY', meta, 'chars', added_size)
    redis.call('SADD', convs, member)
    -- The first spelling that stores something names the agent (its canonical name).
    redis.call('HSETNX', KEYS[3], collection, agent)
    -- A quarantined conversation keeps its new messages but waits for a release.
    if not redis.call('ZSCORE', KEYS[4], member) then
      -- A chunk may close now: flush at once; else wait for the conversation to go quiet.
      local target = now + idle_ms
      if chars >= min_chars or gap then target = now end
      -- A conversation backing off (provider or Qdrant down) keeps its retry time.
      local retry_at = tonumber(redis.call('HGET', meta, 'retry_at') or '0')
      if target < retry_at then target = retry_at end
      local current = tonumber(redis.call('ZSCORE', due, member))
      if current == nil or current > now then redis.call('ZADD', due, target, member) end
    end
  end
end
return {accepted, dups}
"""

_CLAIM = """
local now, ttl, max = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, max)
local claimed = {}
for n, member in ipairs(members) do
  local lease = ARGV[4] .. member
  local left = redis.call('PTTL', lease)
  if redis.call('ZSCORE', KEYS[2], member) then
    -- Quarantined (a save, a force flush or a delete made it due again): it waits for a
    -- release, never for a flush, so it cannot hold back the conversations batched with it.
    redis.call('ZREM', KEYS[1], member)
  elseif left > 0 then
    -- Busy elsewhere: look again when that lease would expire, so a dead worker's
    -- conversation is handed on within seconds and live ones are not polled.
    redis.call('ZADD', KEYS[1], now + left, member)
  else
    local token = ARGV[5] .. ':' .. n
    redis.call('SET', lease, token, 'PX', ttl)
    redis.call('ZADD', KEYS[1], now + ttl, member)
    table.insert(claimed, member)
    table.insert(claimed, token)
  end
end
return claimed
"""

_BEGIN = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return false end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[4], tonumber(ARGV[3]) + tonumber(ARGV[2]), ARGV[4])
return {redis.call('HGETALL', KEYS[2]), redis.call('LRANGE', KEYS[3], 0, -1)}
"""

_RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if (redis.call('HGET', KEYS[2], 'gen') or '0') ~= ARGV[5] then return -1 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[3], tonumber(ARGV[3]) + tonumber(ARGV[2]), ARGV[4])
-- The points this flush is about to write: if it dies or is overtaken before its commit, the
-- next flush takes them back first (they may hold messages deleted meanwhile).
if ARGV[6] ~= '' then redis.call('HSET', KEYS[2], 'inflight', ARGV[6]) end
return 1
"""

_COMMIT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local now, member = tonumber(ARGV[2]), ARGV[3]
if (redis.call('HGET', KEYS[2], 'gen') or '0') ~= ARGV[4] then
  -- A delete ran meanwhile. The lease stays with this worker until it has taken its points
  -- back (settle); the open chunk is no longer known to be stored as it is.
  redis.call('HSET', KEYS[2], 'written', 0)
  return -1
end
local consumed, consumed_chars = tonumber(ARGV[5]), tonumber(ARGV[6])
local open_count, written = tonumber(ARGV[7]), tonumber(ARGV[8])
if consumed > 0 then
  redis.call('LTRIM', KEYS[3], consumed, -1)
  redis.call('HINCRBY', KEYS[2], 'chars', -consumed_chars)
end
for d = 12, #ARGV do redis.call('RPUSH', KEYS[5], ARGV[d]) end
redis.call('HSET', KEYS[2], 'written', written)
redis.call('HDEL', KEYS[2], 'attempts', 'inflight', 'retry_at', 'failures')
-- Only the force requests this flush saw are met; one made while it ran still stands.
local forced = tonumber(ARGV[11])
local force = tonumber(redis.call('HGET', KEYS[2], 'force') or '0')
if forced > 0 then force = redis.call('HINCRBY', KEYS[2], 'force', -forced) end
if force <= 0 then redis.call('HDEL', KEYS[2], 'force') end
if tonumber(ARGV[10]) > 0 then redis.call('HSET', KEYS[6], 'last_write', now) end
local left = redis.call('LLEN', KEYS[3])
if left == 0 or (left == open_count and written == left) then
  redis.call('ZREM', KEYS[4], member)
  redis.call('HDEL', KEYS[2], 'force')
elseif left > open_count or force > 0 then
  redis.call('ZADD', KEYS[4], now, member)
else
  local last = tonumber(redis.call('HGET', KEYS[2], 'last') or now)
  redis.call('ZADD', KEYS[4], last + tonumber(ARGV[9]), member)
end
redis.call('DEL', KEYS[1])
return 1
"""

_SETTLE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[2], 'inflight')
redis.call('HSET', KEYS[2], 'written', 0)
return 1
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[3])
if ARGV[4] == '1' then
  redis.call('HINCRBY', KEYS[2], 'attempts', 1)
  redis.call('HSET', KEYS[2], 'retry_at', ARGV[2])
end
redis.call('DEL', KEYS[1])
return 1
"""

_FORCE = """
local n = 0
for _, member in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local meta = ARGV[2] .. member
  if redis.call('EXISTS', meta) == 1 and redis.call('LLEN', ARGV[3] .. member) > 0 then
    redis.call('HINCRBY', meta, 'force', 1)
    local current = tonumber(redis.call('ZSCORE', KEYS[2], member))
    if current == nil or current > tonumber(ARGV[1]) then
      redis.call('ZADD', KEYS[2], ARGV[1], member)
    end
    n = n + 1
  end
end
return n
"""


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """A message ready to buffer: resolved, with its conversation and dedupe key."""

    conversation: ConversationRef
    message: Message
    guild_id: str | None = None


@dataclass(frozen=True, slots=True)
class ConversationSettings:
    """The per-agent numbers /save needs to schedule a flush."""

    min_chars: int
    gap_seconds: float
    idle_seconds: float
    # Imports have no idle timer: their open chunk is written by the import's final flush.
    idle_timer: bool = True


@dataclass(frozen=True, slots=True)
class SaveCounts:
    accepted: int
    duplicates: int


@dataclass(frozen=True, slots=True)
class Claim:
    """A conversation a worker may flush, proven by the lease token."""

    conversation: str
    token: str


@dataclass(slots=True)
class ConversationState:
    """What a worker reads when it starts a flush."""

    claim: Claim
    meta: dict[str, str]
    messages: list[Message] = field(default_factory=list)

    @property
    def generation(self) -> str:
        return self.meta.get("gen", "0")

    @property
    def agent(self) -> str:
        return self.meta.get("agent", "")

    @property
    def inflight(self) -> list[str]:
        """Points an earlier flush wrote (or meant to) without committing."""
        return list(json.loads(self.meta["inflight"])) if self.meta.get("inflight") else []


@dataclass(frozen=True, slots=True)
class Commit:
    """The outcome of a flush for one conversation, applied atomically if the lease still holds."""

    consumed: int
    consumed_chars: int
    open_count: int
    written: int
    idle_seconds: float
    wrote_points: bool
    dead_letters: Sequence[str] = ()
    forced: int = 0  # the force requests the flush saw (meta `force` when it began)


def _group_args(
    name: str, key: str, items: list[IncomingMessage], conv: ConversationSettings
) -> list[object]:
    ref = items[0].conversation
    guild = next((item.guild_id for item in items if item.guild_id), None)
    args: list[object] = [
        keys.meta(key), keys.buffer(key), keys.conversations(ref.collection), key,
        name, ref.source, ref.conversation_id or "", ref.channel_id or "", guild or "",
        conv.min_chars, int(conv.gap_seconds * 1000), int(conv.idle_seconds * 1000), len(items),
        "" if conv.idle_timer else "1",
    ]  # fmt: skip
    for item in items:
        message = item.message
        seen = keys.seen(ref.collection, ref.source, message.id)
        args.extend([seen, message.to_json(), message.size, message.ts])
    return args


@dataclass(frozen=True, slots=True)
class AgentRef:
    """Whose messages a save carries: the agent's identity (its collection) and its name."""

    name: str
    collection: str


def save_call(
    agent: AgentRef, incoming: Sequence[IncomingMessage], conv: ConversationSettings, ttl: int
) -> tuple[list[str], list[object]]:
    """The save script's keys and arguments: the same for the sync and the async client."""
    groups: dict[str, list[IncomingMessage]] = {}
    for item in incoming:
        groups.setdefault(item.conversation.key, []).append(item)
    args: list[object] = [_now_ms(), ttl, len(groups), agent.collection]
    for key, items in groups.items():
        args.extend(_group_args(agent.name, key, items, conv))
    return [keys.DUE, keys.blocked(agent.collection), keys.NAMES, keys.QUARANTINE], args


def save_counts(result: Sequence[object]) -> SaveCounts:
    if int(str(result[0])) == -1:
        raise AgentBlocked(_decode(result[1]))
    return SaveCounts(accepted=int(str(result[0])), duplicates=int(str(result[1])))


def _now_ms() -> int:
    return int(time.time() * 1000)


def _decode(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Buffers:
    """The Redis operations of the write path, each a single atomic script."""

    def __init__(
        self, client: redis.Redis, *, dedupe_ttl_seconds: int, lease_seconds: float
    ) -> None:
        self.redis = client
        self.dedupe_ttl = dedupe_ttl_seconds
        self.lease_ms = int(lease_seconds * 1000)
        self._save = client.register_script(_SAVE)
        self._claim = client.register_script(_CLAIM)
        self._begin = client.register_script(_BEGIN)
        self._renew = client.register_script(_RENEW)
        self._commit = client.register_script(_COMMIT)
        self._release = client.register_script(_RELEASE)
        self._settle = client.register_script(_SETTLE)
        self._force = client.register_script(_FORCE)

    # --- /save -------------------------------------------------------------------------
    def save(
        self, agent: AgentRef, incoming: Sequence[IncomingMessage], conv: ConversationSettings
    ) -> SaveCounts:
        """Buffer the messages not seen before, in one atomic step for the whole request."""
        script_keys, args = save_call(agent, incoming, conv, self.dedupe_ttl)
        try:
            result = self._save(keys=script_keys, args=args)
        except redis.RedisError as exc:
            raise UpstreamUnavailable(f"Redis is unavailable: {exc}") from exc
        return save_counts(result)

    # --- the scheduler -----------------------------------------------------------------
    def claim_due(self, limit: int) -> list[Claim]:
        """Lease up to `limit` conversations whose flush is due and that no worker holds."""
        base = uuid.uuid4().hex
        args = [_now_ms(), self.lease_ms, limit, keys.lease(""), base]
        result = self._claim(keys=[keys.DUE, keys.QUARANTINE], args=args)
        pairs = [_decode(item) for item in result]
        return [Claim(pairs[i], pairs[i + 1]) for i in range(0, len(pairs), 2)]

    # --- the workers -------------------------------------------------------------------
    def _conv_keys(self, conversation: str) -> list[str]:
        return [keys.lease(conversation), keys.meta(conversation), keys.buffer(conversation)]

    def begin(self, claim: Claim) -> ConversationState | None:
        """Start a flush: renew the lease and read the conversation, or None if it is not ours."""
        lease, meta, buf = self._conv_keys(claim.conversation)
        result = self._begin(
            keys=[lease, meta, buf, keys.DUE],
            args=[claim.token, self.lease_ms, _now_ms(), claim.conversation],
        )
        if not result:
            return None
        flat = [_decode(item) for item in result[0]]
        state = ConversationState(claim, dict(zip(flat[::2], flat[1::2], strict=True)))
        state.messages = [Message.from_json(raw) for raw in result[1]]
        return state

    def renew(self, state: ConversationState, writing: Sequence[str] = ()) -> int:
        """Keep the lease before a slow step, noting the points about to be written:
        1 kept, 0 lost, -1 the conversation changed."""
        lease, meta, _ = self._conv_keys(state.claim.conversation)
        result = self._renew(
            keys=[lease, meta, keys.DUE],
            args=[state.claim.token, self.lease_ms, _now_ms(), state.claim.conversation,
                  state.generation, json.dumps(list(writing)) if writing else ""],
        )  # fmt: skip
        return int(result)

    def settle(self, claim: Claim) -> bool:
        """The points of an unfinished flush are taken back: forget them, and that the open
        chunk was stored (its point may have been one of them)."""
        lease, meta, _ = self._conv_keys(claim.conversation)
        return int(self._settle(keys=[lease, meta], args=[claim.token])) == 1

    def commit(self, state: ConversationState, commit: Commit) -> int:
        """Apply a flush: 1 done, 0 lease lost (nothing changed), -1 conversation changed."""
        conversation = state.claim.conversation
        lease, meta, buf = self._conv_keys(conversation)
        args: list[object] = [
            state.claim.token, _now_ms(), conversation, state.generation, commit.consumed,
            commit.consumed_chars, commit.open_count, commit.written,
            int(commit.idle_seconds * 1000), int(commit.wrote_points), commit.forced,
            *commit.dead_letters,
        ]  # fmt: skip
        stats = keys.agent_stats(collection_of(conversation))
        return int(
            self._commit(keys=[lease, meta, buf, keys.DUE, keys.DEAD_LETTERS, stats], args=args)
        )

    def release(self, claim: Claim, *, retry_in: float, failed: bool) -> bool:
        """Give a conversation back, to be flushed again in `retry_in` seconds."""
        lease, meta, _ = self._conv_keys(claim.conversation)
        due_at = _now_ms() + int(retry_in * 1000)
        args = [claim.token, due_at, claim.conversation, "1" if failed else "0"]
        return int(self._release(keys=[lease, meta, keys.DUE], args=args)) == 1

    # --- operations --------------------------------------------------------------------
    def conversations_of(self, collection: str) -> list[str]:
        """The keys of every conversation an agent has buffered messages in (or once had)."""
        return sorted(_decode(m) for m in self.redis.smembers(keys.conversations(collection)))

    def buffered_messages(self, conversations: Sequence[str]) -> int:
        """Messages waiting in these conversations' buffers, open chunks included."""
        pipe = self.redis.pipeline(transaction=False)
        for conversation in conversations:
            pipe.llen(keys.buffer(conversation))
        return sum(int(n) for n in pipe.execute())

    def force_flush(self, collection: str) -> list[str]:
        """Mark every conversation of an agent with buffered messages to be written now."""
        members = self.conversations_of(collection)
        self._force(
            keys=[keys.conversations(collection), keys.DUE],
            args=[_now_ms(), keys.meta(""), keys.buffer("")],
        )
        return members

    def unwritten(self, conversations: Sequence[str]) -> int:
        """How many of these conversations still hold messages that are not stored as written."""
        pipe = self.redis.pipeline(transaction=False)
        for conversation in conversations:
            pipe.llen(keys.buffer(conversation))
            pipe.hget(keys.meta(conversation), "written")
        replies = pipe.execute()
        pending = 0
        for length, written in zip(replies[::2], replies[1::2], strict=True):
            if int(length) > int(written or 0):
                pending += 1
        return pending


class AsyncSaver:
    """/save's one Redis step on the API's event loop: no thread hand-off per request
    (that hand-off was a fifth of /save's CPU, BENCHMARKS.md)."""

    def __init__(self, client: redis.asyncio.Redis, *, dedupe_ttl_seconds: int) -> None:
        self.redis = client
        self.dedupe_ttl = dedupe_ttl_seconds
        self._save = client.register_script(_SAVE)

    async def save(
        self, agent: AgentRef, incoming: Sequence[IncomingMessage], conv: ConversationSettings
    ) -> SaveCounts:
        script_keys, args = save_call(agent, incoming, conv, self.dedupe_ttl)
        try:
            result = await self._save(keys=script_keys, args=args)
        except redis.RedisError as exc:
            raise UpstreamUnavailable(f"Redis is unavailable: {exc}") from exc
        return save_counts(result)

    async def close(self) -> None:
        await self.redis.aclose()

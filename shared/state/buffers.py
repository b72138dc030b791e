"""The Redis side of the write path: dedupe, conversation buffers, the due set and leases.

Every change is one Lua script (shared/state/scripts/*.lua, each headed by its KEYS, ARGV and
result), so it is atomic; the scripts keep to Redis 6.0 commands. Keys are
passed as arguments because each call touches many conversations: memory-pool needs a standalone
Redis (or one cluster slot), not Redis Cluster.
"""

from __future__ import annotations

import enum
import json
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import redis
import redis.asyncio

from shared.errors import AgentBlocked, UpstreamUnavailable
from shared.format.fingerprint import text_fingerprint
from shared.format.messages import Message
from shared.state import keys
from shared.state.conversation_meta import ConversationMeta, Field
from shared.state.conversations import ConversationRef, collection_of
from shared.state.scripts import SOURCES, named
from shared.state.text import as_text


@dataclass(slots=True)
class ConversationBatch:
    """One conversation's messages in one save, as the save script takes them: their ids and
    their stored JSON (shared/messages.stored_json), in arrival order."""

    conversation: ConversationRef
    ids: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    guild_id: str | None = None  # the first guild one of them names
    fingerprints: list[str] = field(default_factory=list)
    # positions (1-based, as the script counts) of the messages too short to store: only an
    # edit of a known id can use them (to take the message out of its chunk)
    short: list[int] = field(default_factory=list)

    def append(
        self,
        message_id: str,
        line: str,
        guild_id: str | None = None,
        *,
        fingerprint: str = "",
        short: bool = False,
    ) -> None:
        self.ids.append(message_id)
        self.lines.append(line)
        self.fingerprints.append(fingerprint)
        if short:
            self.short.append(len(self.ids))
        if self.guild_id is None and guild_id:
            self.guild_id = guild_id


class SaveBatches:
    """Groups a save's messages by conversation, as the save script takes them.

    By the conversation's key, not its ref: a conversation id seen with two channels is one
    conversation (ConversationRef.scope), and its messages keep their order in one batch.
    """

    def __init__(self) -> None:
        self._by_key: dict[str, ConversationBatch] = {}

    def batch(self, ref: ConversationRef) -> ConversationBatch:
        """The batch of `ref`'s conversation (made on first use: the first ref names it)."""
        key = ref.key
        found = self._by_key.get(key)
        if found is None:
            found = self._by_key[key] = ConversationBatch(ref)
        return found

    def add(self, ref: ConversationRef, message: Message, guild_id: str | None = None) -> None:
        self.batch(ref).append(
            message.id, message.to_json(), guild_id, fingerprint=text_fingerprint(message.text)
        )

    def __iter__(self) -> Iterator[ConversationBatch]:
        return iter(self._by_key.values())


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
    edited: int = 0  # re-sent with another text: buffered ones changed, written ones queued
    stale: int = 0  # edits of messages whose written chunk cannot be rebuilt (older points)
    skipped: int = 0  # too short to store (or an emptied message's re-send)
    # edit_only: what happened to each message (new, same, deleted, edited, stale, emptied)
    outcomes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Claim:
    """A conversation a worker may flush, proven by the lease token."""

    conversation: str
    token: str


@dataclass(slots=True)
class ConversationState:
    """What a worker reads when it starts a flush: the hash typed once (`info`), which the
    flush changes as it goes (took_back, writing)."""

    claim: Claim
    info: ConversationMeta
    messages: list[Message] = field(default_factory=list)

    @property
    def generation(self) -> str:
        return self.info.generation

    @property
    def agent(self) -> str:
        return self.info.agent

    @property
    def inflight(self) -> list[str]:
        """Points an earlier flush wrote (or meant to) without committing."""
        return list(self.info.inflight)

    @property
    def to_take_back(self) -> bool:
        """Points in flight, or an open chunk's point to retire, before the flush plans."""
        return bool(self.info.inflight or self.info.retire)

    def took_back(self) -> None:
        """The points in flight are deleted: none is in flight, no open chunk is written."""
        self.info = replace(self.info, inflight=(), retire=None, written=0)

    def writing(self, point_ids: Sequence[str]) -> None:
        """These points are written and not committed: a take-back deletes them."""
        self.info = replace(self.info, inflight=tuple(point_ids))


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


class LeaseCheck(enum.Enum):
    """What renewing a lease found."""

    KEPT = 1
    LOST = 0  # another worker holds the conversation now
    CHANGED = -1  # a delete ran meanwhile: flush it again from what is left


class CommitOutcome(enum.Enum):
    """What applying a flush did."""

    DONE = 1
    LEASE_LOST = 0  # nothing changed
    CHANGED = -1  # a delete ran meanwhile: the lease stays, the caller takes its points back


def _group(
    name: str, batch: ConversationBatch, conv: ConversationSettings, raw: list[str]
) -> dict[str, Any]:
    """One conversation of a save (save.lua's `groups`); its messages' stored JSON go to `raw`."""
    ref = batch.conversation
    key = ref.key
    once = {Field.AGENT: name, Field.SOURCE: ref.source, Field.CID: ref.conversation_id or "",
            Field.CHANNEL: ref.channel_id or "", Field.GUILD: batch.guild_id or "",
            Field.NOIDLE: "" if conv.idle_timer else "1"}  # fmt: skip
    raw.extend(batch.lines)
    return {
        "meta": keys.meta(key), "buf": keys.buffer(key), "member": key,
        "convs": keys.conversations(ref.collection), "agent": name,
        "fields": {f: v for f, v in once.items() if v},
        "min_chars": conv.min_chars, "gap_ms": int(conv.gap_seconds * 1000),
        "idle_ms": int(conv.idle_seconds * 1000),
        "seen_prefix": keys.seen(ref.collection, ref.source, ""),
        "ids": [keys.part(message_id) for message_id in batch.ids],
        "fps": batch.fingerprints, "short": batch.short,
        "edit_prefix": keys.edit_field(ref.source, ""),
    }  # fmt: skip


@dataclass(frozen=True, slots=True)
class AgentRef:
    """Whose messages a save carries: the agent's identity (its collection) and its name."""

    name: str
    collection: str


# A re-sent id's dedupe marker gets its full expiry back once a minute (1% of a short TTL), not
# on every re-send: a write and an AOF line per id and minute, not per request. The mark holds
# its expiry's minute (save.lua), so a re-send in the same minute finds it equal to the mark it
# would write. An id stays remembered for the dedupe TTL after it was last seen, to that minute.
REFRESH_AFTER_MS = 60_000


def refresh_after_ms(ttl_seconds: int) -> int:
    return min(REFRESH_AFTER_MS, ttl_seconds * 10)


@dataclass(frozen=True, slots=True)
class SaveMode:
    """A save (the default) or an explicit edit: `edit_only` stores no new id and reports each
    message's outcome; `stored` says the id, if it has no mark, is in a rebuildable chunk."""

    edit_only: bool = False
    stored: bool = False


def save_call(
    agent: AgentRef,
    batches: Iterable[ConversationBatch],
    conv: ConversationSettings,
    ttl: int,
    mode: SaveMode = SaveMode(),
) -> tuple[list[str], list[str]]:
    """The save script's keys and arguments: the same for the sync and the async client."""
    raw: list[str] = []
    groups = [_group(agent.name, batch, conv, raw) for batch in batches if batch.ids]
    plan = {"now": _now_ms(), "ttl": ttl, "refresh_ms": refresh_after_ms(ttl),
            "collection": agent.collection, "groups": groups,
            "meta_prefix": keys.meta(""), "buf_prefix": keys.buffer(""),
            "edit_only": mode.edit_only, "stored": mode.stored}  # fmt: skip
    collection = agent.collection
    script_keys = [keys.DUE, keys.blocked(collection), keys.NAMES, keys.QUARANTINE,
                   keys.edits(collection), keys.EDITS_DUE, keys.emptied(collection)]  # fmt: skip
    # Stored JSON holds no raw newline (json escapes it): one line per message, one argument.
    return script_keys, [named(plan), "\n".join(raw)]


def save_counts(result: Sequence[object]) -> SaveCounts:
    if int(str(result[0])) == -1:
        raise AgentBlocked(as_text(result[1]))
    accepted, duplicates, edited, stale, skipped = (int(str(item)) for item in result[:5])
    return SaveCounts(accepted, duplicates, edited, stale, skipped,
                      outcomes=tuple(as_text(item) for item in result[5:]))  # fmt: skip


def _now_ms() -> int:
    return int(time.time() * 1000)


class Buffers:
    """The Redis operations of the write path, each a single atomic script."""

    def __init__(
        self, client: redis.Redis, *, dedupe_ttl_seconds: int, lease_seconds: float
    ) -> None:
        self.redis = client
        self.dedupe_ttl = dedupe_ttl_seconds
        self.lease_ms = int(lease_seconds * 1000)
        self._claim = client.register_script(SOURCES["claim"])
        self._begin = client.register_script(SOURCES["begin"])
        self._renew = client.register_script(SOURCES["renew"])
        self._commit = client.register_script(SOURCES["commit"])
        self._release = client.register_script(SOURCES["release"])
        self._settle = client.register_script(SOURCES["settle"])
        self._force = client.register_script(SOURCES["force"])

    # --- the scheduler -----------------------------------------------------------------
    def claim_due(self, limit: int) -> list[Claim]:
        """Lease up to `limit` conversations whose flush is due and that no worker holds."""
        base = uuid.uuid4().hex
        args = named({"now": _now_ms(), "lease_ms": self.lease_ms, "max": limit,
                      "lease_prefix": keys.lease(""), "token_base": base})  # fmt: skip
        result = self._claim(keys=[keys.DUE, keys.QUARANTINE], args=[args])
        pairs = [as_text(item) for item in result]
        return [Claim(pairs[i], pairs[i + 1]) for i in range(0, len(pairs), 2)]

    # --- the workers -------------------------------------------------------------------
    def _conv_keys(self, conversation: str) -> list[str]:
        return [keys.lease(conversation), keys.meta(conversation), keys.buffer(conversation)]

    def begin(self, claim: Claim) -> ConversationState | None:
        """Start a flush: renew the lease and read the conversation, or None if it is not ours."""
        lease, meta, buf = self._conv_keys(claim.conversation)
        args = {"token": claim.token, "lease_ms": self.lease_ms, "now": _now_ms(),
                "member": claim.conversation}  # fmt: skip
        result = self._begin(keys=[lease, meta, buf, keys.DUE], args=[named(args)])
        if not result:
            return None
        flat = [as_text(item) for item in result[0]]
        info = ConversationMeta.of(dict(zip(flat[::2], flat[1::2], strict=True)))
        return ConversationState(claim, info, [Message.from_json(raw) for raw in result[1]])

    def renew(self, state: ConversationState, writing: Sequence[str] = ()) -> LeaseCheck:
        """Keep the lease before a slow step, noting the points about to be written."""
        lease, meta, _ = self._conv_keys(state.claim.conversation)
        args = {"token": state.claim.token, "lease_ms": self.lease_ms, "now": _now_ms(),
                "member": state.claim.conversation, "gen": state.generation,
                "inflight": json.dumps(list(writing)) if writing else ""}  # fmt: skip
        return LeaseCheck(int(self._renew(keys=[lease, meta, keys.DUE], args=[named(args)])))

    def settle(self, claim: Claim, retired: str | None = None) -> bool:
        """The points of an unfinished flush are taken back (and the open chunk's point an edit
        asked to retire, `retired`): forget them, and that the open chunk was stored (its point
        may have been one of them)."""
        lease, meta, _ = self._conv_keys(claim.conversation)
        args = named({"token": claim.token, "retire": retired or ""})
        return int(self._settle(keys=[lease, meta], args=[args])) == 1

    def commit(self, state: ConversationState, commit: Commit) -> CommitOutcome:
        """Apply a flush, atomically, if the lease still holds and no delete ran meanwhile."""
        conversation = state.claim.conversation
        lease, meta, buf = self._conv_keys(conversation)
        args = {"token": state.claim.token, "now": _now_ms(), "member": conversation,
                "gen": state.generation, "consumed": commit.consumed,
                "consumed_chars": commit.consumed_chars, "open_count": commit.open_count,
                "written": commit.written, "idle_ms": int(commit.idle_seconds * 1000),
                "wrote_points": int(commit.wrote_points), "forced": commit.forced}  # fmt: skip
        stats = keys.agent_stats(collection_of(conversation))
        script_keys = [lease, meta, buf, keys.DUE, keys.DEAD_LETTERS, stats]
        result = self._commit(keys=script_keys, args=[named(args), *commit.dead_letters])
        return CommitOutcome(int(result))

    def release(self, claim: Claim, *, retry_in: float, failed: bool) -> bool:
        """Give a conversation back, to be flushed again in `retry_in` seconds."""
        lease, meta, _ = self._conv_keys(claim.conversation)
        due_at = _now_ms() + int(retry_in * 1000)
        args = named({"token": claim.token, "due_at": due_at, "member": claim.conversation,
                      "failed": failed})  # fmt: skip
        return int(self._release(keys=[lease, meta, keys.DUE], args=[args])) == 1

    # --- operations --------------------------------------------------------------------
    def conversations_of(self, collection: str) -> list[str]:
        """The keys of every conversation an agent has buffered messages in (or once had)."""
        return sorted(as_text(m) for m in self.redis.smembers(keys.conversations(collection)))

    def buffered_messages(self, conversations: Sequence[str]) -> int:
        """Messages waiting in these conversations' buffers, open chunks included."""
        pipe = self.redis.pipeline(transaction=False)
        for conversation in conversations:
            pipe.llen(keys.buffer(conversation))
        return sum(int(n) for n in pipe.execute())

    def force_flush(self, collection: str) -> list[str]:
        """Mark every conversation of an agent with buffered messages to be written now."""
        members = self.conversations_of(collection)
        args = {"now": _now_ms(), "meta_prefix": keys.meta(""), "buffer_prefix": keys.buffer("")}
        self._force(keys=[keys.conversations(collection), keys.DUE], args=[named(args)])
        return members

    def unwritten(self, conversations: Sequence[str]) -> int:
        """How many of these conversations still hold messages that are not stored as written."""
        return sum(1 for left in unwritten_messages(self.redis, conversations) if left)


def unwritten_messages(client: redis.Redis, conversations: Sequence[str]) -> list[int]:
    """Each conversation's buffered messages not stored in any point yet (an open chunk that
    is written counts as stored), in one round trip."""
    pipe = client.pipeline(transaction=False)
    for conversation in conversations:
        pipe.llen(keys.buffer(conversation))
        pipe.hget(keys.meta(conversation), Field.WRITTEN)
    replies = pipe.execute()
    return [
        max(0, int(length) - int(written or 0))
        for length, written in zip(replies[::2], replies[1::2], strict=True)
    ]


class AsyncSaver:
    """/save's one Redis step on the API's event loop: no thread hand-off per request
    (that hand-off was a fifth of /save's CPU, BENCHMARKS.md)."""

    def __init__(self, client: redis.asyncio.Redis, *, dedupe_ttl_seconds: int) -> None:
        self.redis = client
        self.dedupe_ttl = dedupe_ttl_seconds
        self._save = client.register_script(SOURCES["save"])

    async def save(
        self,
        agent: AgentRef,
        batches: Iterable[ConversationBatch],
        conv: ConversationSettings,
        mode: SaveMode = SaveMode(),
    ) -> SaveCounts:
        script_keys, args = save_call(agent, batches, conv, self.dedupe_ttl, mode)
        try:
            result = await self._save(keys=script_keys, args=args)
        except redis.RedisError as exc:
            raise UpstreamUnavailable(f"Redis is unavailable: {exc}") from exc
        return save_counts(result)

    async def close(self) -> None:
        await self.redis.aclose()

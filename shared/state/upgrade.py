"""Upgrades Redis state written by an older memory-pool to today's key layout, once, at start.

Layout 1 keyed every per-agent thing by the agent name as clients spelled it (case-folded);
layout 2 keys it by the agent's collection, so every spelling reaching one collection is one
agent. The upgrade moves dedupe marks (tombstones stay tombstones), buffers, conversation state,
leases and due entries; two spellings of one collection merge into one conversation without
losing, doubling or resurrecting a message.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from urllib.parse import unquote

import redis

from shared.agents import Agents
from shared.errors import InvalidAgentName
from shared.format.naming import point_id
from shared.state import keys
from shared.state.conversation_meta import Field
from shared.state.conversations import source_of
from shared.state.lock import held
from shared.state.scripts import SOURCES
from shared.state.text import as_text

log = logging.getLogger(__name__)

LAYOUT = 2
LOCK_MS = 300_000
WAIT_SECONDS = 300.0
BATCH = 500
LATE = 2**62  # "no known time": sorts after every real Unix ms

# KEYS[1] the old marker, KEYS[2..] its new places. A tombstone (no expiry) wins over a mark
# that expires, and the longer of two expiries is kept: what was refused stays refused.
_MOVE_SEEN = SOURCES["upgrade_move_seen"]

# KEYS: old meta, old buffer, old lease, new meta, new buffer, new lease, due set, new
# conversations set, old conversations set. ARGV: old member, new member, now, then the points
# of both conversations' stored open chunks.
# Without a conversation at the new key, its keys are renamed (expiries, a live lease, in-flight
# points and the due time come along). With one (two spellings of one agent), the old
# buffers are merged (each message once, in timestamp order); the generation moves on, so a
# flush in flight takes its points back; both open chunks' points are taken back by the next
# flush, as their messages are now written as part of the merged conversation.
_MOVE_CONVERSATION = SOURCES["upgrade_move_conversation"]


@dataclass
class UpgradeReport:
    layout_before: int
    conversations: int = 0
    markers: int = 0
    agents: dict[str, str] = field(default_factory=dict)  # collection -> canonical name


def layout(client: redis.Redis) -> int:
    """The layout of the state in Redis: what SCHEMA says, else 1 when layout-1 keys exist."""
    recorded = client.get(keys.SCHEMA)
    if recorded is not None:
        return int(recorded)
    legacy = client.exists(keys.LEGACY_AGENTS) or next(
        client.scan_iter(match=f"{keys.PREFIX}seen:*", count=1000), None
    )
    return 1 if legacy else LAYOUT


def upgrade(client: redis.Redis, agents: Agents) -> UpgradeReport | None:
    """Bring Redis to today's layout; None when it already is. Safe to call from every process:
    one upgrades under a lock, the others wait for it."""
    if _is_current(client):
        return None
    with held(
        client, keys.UPGRADE_LOCK, ttl_ms=LOCK_MS, wait_seconds=WAIT_SECONDS, poll=0.2
    ) as got:
        if not got:
            raise TimeoutError("another process has been upgrading Redis for too long")
        before = layout(client)
        if before >= LAYOUT:
            client.set(keys.SCHEMA, LAYOUT)
            return None
        report = _upgrade_from_1(client, agents)
        client.set(keys.SCHEMA, LAYOUT)
        log.warning(
            "Redis upgraded to layout %d: %d conversations and %d dedupe marks re-keyed by "
            "collection", LAYOUT, report.conversations, report.markers,
        )  # fmt: skip
        return report


def upgrade_at_start(client: redis.Redis, agents: Agents, *, retry_seconds: float = 5.0) -> None:
    """Upgrade now; if Redis cannot be reached yet, keep trying in the background, so a
    process still starts (and answers 503) during a Redis outage."""
    try:
        upgrade(client, agents)
    except redis.RedisError as exc:
        log.warning("Redis layout check waits for Redis: %s", exc)
        threading.Thread(
            target=_retry, args=(client, agents, retry_seconds), name="redis-upgrade", daemon=True
        ).start()


def _retry(client: redis.Redis, agents: Agents, retry_seconds: float) -> None:
    while True:
        time.sleep(retry_seconds)
        try:
            upgrade(client, agents)
            return
        except redis.RedisError:
            continue


def _is_current(client: redis.Redis) -> bool:
    recorded = client.get(keys.SCHEMA)
    return recorded is not None and int(recorded) >= LAYOUT


def _collection(agents: Agents, name: str) -> str | None:
    try:
        return agents.collection_of(name)
    except InvalidAgentName:
        return None  # it could never store anything: nothing of it to move


class _Plan:
    """Where each layout-1 agent part of a key goes: the collections its spellings reach, and
    the name each collection keeps: a listed agent's own, else the spelling of the conversation
    quiet the longest (layout 1 kept no first-seen time), else the first spelling in order."""

    def __init__(self, client: redis.Redis, agents: Agents) -> None:
        self.agents = agents
        self.targets: dict[str, set[str]] = defaultdict(set)
        self._spellings: dict[str, set[tuple[int, str]]] = defaultdict(set)
        for agent in agents.listed:
            self._add(agent.name, agent.collection_name)
        for raw in sorted(client.smembers(keys.LEGACY_AGENTS)):
            spelling = as_text(raw)
            collection = _collection(agents, spelling)
            if collection is not None:
                self._add(spelling, collection, since=LATE)

    def _add(self, spelling: str, collection: str, *, since: int = LATE) -> None:
        self.targets[keys.part(spelling.casefold())].add(collection)
        self._spellings[collection].add((since, spelling))

    @property
    def names(self) -> dict[str, str]:
        names = {c: min(spellings)[1] for c, spellings in self._spellings.items()}
        names.update({agent.collection_name: agent.name for agent in self.agents.listed})
        return names

    def conversation(self, old_part: str, spelling: str | None, since: int) -> str | None:
        """The collection a conversation was written to: its recorded agent's, which is the
        one flushes used."""
        if spelling:
            collection = _collection(self.agents, spelling)
            if collection is not None:
                self._add(spelling, collection, since=since)
                return collection
        found = self.marker_targets(old_part)
        return sorted(found)[0] if found else None

    def marker_targets(self, old_part: str) -> set[str]:
        if old_part in self.targets:
            return self.targets[old_part]
        derived = _collection(self.agents, unquote(old_part))
        return {derived} if derived else set()


def _upgrade_from_1(client: redis.Redis, agents: Agents) -> UpgradeReport:
    plan = _Plan(client, agents)
    report = UpgradeReport(layout_before=1)
    report.conversations = _move_conversations(client, plan)
    report.markers = _move_markers(client, plan)
    _move_agent_keys(client, plan)
    for collection, name in plan.names.items():
        client.hsetnx(keys.NAMES, collection, name)
    client.delete(keys.LEGACY_AGENTS)
    report.agents = plan.names
    return report


def _open_points(client: redis.Redis, conversations: list[str], collection: str) -> list[str]:
    """The points of these conversations' stored open chunks."""
    found = []
    for conversation in conversations:
        written = int(client.hget(keys.meta(conversation), Field.WRITTEN) or 0)
        first = client.lindex(keys.buffer(conversation), 0)
        if written > 0 and first is not None:
            message_id = str(json.loads(first)["i"])
            found.append(point_id(collection, source_of(conversation), message_id))
    return found


def _move_conversations(client: redis.Redis, plan: _Plan) -> int:
    move = client.register_script(_MOVE_CONVERSATION)
    moved = 0
    for convs_key in list(client.scan_iter(match=f"{keys.PREFIX}convs:*", count=1000)):
        old_set = as_text(convs_key)
        for raw in client.smembers(old_set):
            old = as_text(raw)
            old_part, _, rest = old.partition(":")
            spelling, last = client.hmget(keys.meta(old), [Field.AGENT, Field.LAST])
            collection = plan.conversation(
                old_part, as_text(spelling) if spelling else None, int(last or LATE)
            )
            if collection is None or keys.agent_key(collection) == old_part:
                continue
            new = f"{keys.agent_key(collection)}:{rest}"
            move(
                keys=[keys.meta(old), keys.buffer(old), keys.lease(old), keys.meta(new),
                      keys.buffer(new), keys.lease(new), keys.DUE,
                      keys.conversations(collection), old_set],
                args=[old, new, int(time.time() * 1000),
                      *_open_points(client, [old, new], collection)],
            )  # fmt: skip
            moved += 1
    return moved


def _move_markers(client: redis.Redis, plan: _Plan) -> int:
    move = client.register_script(_MOVE_SEEN)
    prefix = f"{keys.PREFIX}seen:"
    # A scan may also return the markers this upgrade writes: their agent part is a new one.
    written = {keys.agent_key(c) for targets in plan.targets.values() for c in targets}
    moved = 0
    pipe = client.pipeline(transaction=False)
    for raw in client.scan_iter(match=f"{prefix}*", count=1000):
        old = as_text(raw)
        old_part, _, rest = old.removeprefix(prefix).partition(":")
        if old_part in written:
            continue
        targets = sorted(plan.marker_targets(old_part))
        written.update(keys.agent_key(c) for c in targets)
        places = [f"{prefix}{keys.agent_key(c)}:{rest}" for c in targets]
        if not places:
            continue
        move(keys=[old, *places], client=pipe)
        moved += 1
        if moved % BATCH == 0:
            pipe.execute()
    pipe.execute()
    return moved


def _move_agent_keys(client: redis.Redis, plan: _Plan) -> None:
    """Last-write stats carry over; a held-writes flag is set again by the next flush."""
    for old_part, collections in list(plan.targets.items()):
        old_stats = f"{keys.PREFIX}stats:{old_part}"
        last = client.hget(old_stats, "last_write")
        for collection in collections:
            if keys.agent_key(collection) == old_part:
                continue
            if last is not None:
                current = client.hget(keys.agent_stats(collection), "last_write")
                if current is None or int(current) < int(last):
                    client.hset(keys.agent_stats(collection), "last_write", last)
            client.delete(old_stats, f"{keys.PREFIX}blocked:{old_part}")

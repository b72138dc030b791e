"""Redis state written mid-flight by the positional-ARGV scripts (main before the named-argument
scripts, tests/fixtures/redis_v2_positional.json) is read and carried on by today's scripts: the
stored layout did not change, so there is no upgrade step, and this proves it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import redis

from shared.format.messages import Message
from shared.state import keys
from shared.state.buffers import (
    AgentRef,
    Buffers,
    Claim,
    Commit,
    CommitOutcome,
    ConversationSettings,
)
from shared.state.conversations import ConversationRef
from tests.support.buffer_save import IncomingMessage, buffer_save
from tests.support.redis_dump import load_dump

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "redis_v2_positional.json"
C1 = ConversationRef(collection="mem_polaris", source="discord", channel_id="c1")
C2 = ConversationRef(collection="mem_polaris", source="discord", channel_id="c2")
AGENT = AgentRef("Polaris", "mem_polaris")
QUIET = ConversationSettings(min_chars=100_000, gap_seconds=86400, idle_seconds=3600)


def load(client: redis.Redis) -> dict[str, Any]:
    return load_dump(client, FIXTURE)


def test_a_flush_begun_by_the_old_scripts_is_finished_by_the_new(r: redis.Redis) -> None:
    dump = load(r)
    buffers = Buffers(r, dedupe_ttl_seconds=86400, lease_seconds=600)
    state = buffers.begin(Claim(C1.key, dump["lease_token_c1"]))
    assert state is not None
    assert [m.id for m in state.messages] == ["a0", "a1", "a2"]
    assert state.messages[0].user_id == "u1" and state.inflight == ["p-1", "p-2"]
    assert state.generation == "0" and state.agent == "Polaris"
    size = sum(m.size for m in state.messages)
    done = buffers.commit(state, Commit(3, size, 0, 0, 3600, wrote_points=True))
    assert done is CommitOutcome.DONE
    meta = r.hgetall(keys.meta(C1.key))
    assert meta["chars"] == "0" and "inflight" not in meta and not r.exists(keys.buffer(C1.key))


def test_old_dedupe_markers_and_tombstones_hold_for_new_saves(r: redis.Redis) -> None:
    dump = load(r)
    buffers = Buffers(r, dedupe_ttl_seconds=86400, lease_seconds=600)
    now = int(time.time() * 1000)
    resent = [Message(f"a{i}", f"hello {i}", dump["written_at_ms"] - 5000 + i, "Alex", "u1")
              for i in range(3)]  # fmt: skip
    sent = [
        *resent,
        Message("gone1", "deleted before", now, "Alex"),
        Message("a3", "new", now, "A"),
    ]
    counts = buffer_save(buffers, AGENT, [IncomingMessage(C1, m) for m in sent], QUIET)
    assert (counts.accepted, counts.duplicates) == (1, 4)
    assert r.ttl(keys.seen(C1.collection, C1.source, "gone1")) == -1  # still a tombstone
    assert [json.loads(x)["i"] for x in r.lrange(keys.buffer(C1.key), 0, -1)] == [
        "a0", "a1", "a2", "a3"
    ]  # fmt: skip
    assert r.hget(keys.meta(C1.key), "newest") == str(now)


def test_an_old_back_off_is_kept_by_new_saves(r: redis.Redis) -> None:
    load(r)
    retry_at = int(r.hget(keys.meta(C2.key), "retry_at") or 0)
    assert retry_at > 0 and r.hget(keys.meta(C2.key), "attempts") == "1"
    # still backing off: the old code keeps the due time equal to retry_at, so both move (the
    # fixture's own retry_at was written hours ago and is past by now)
    retry_at = int(time.time() * 1000) + 7_200_000
    r.hset(keys.meta(C2.key), "retry_at", retry_at)
    r.zadd(keys.DUE, {C2.key: retry_at})
    buffers = Buffers(r, dedupe_ttl_seconds=86400, lease_seconds=600)
    closing = ConversationSettings(min_chars=1, gap_seconds=86400, idle_seconds=1)
    late = Message("b9", "x", int(time.time() * 1000), "S")
    buffer_save(buffers, AGENT, [IncomingMessage(C2, late)], closing)
    assert r.zscore(keys.DUE, C2.key) == int(r.hget(keys.meta(C2.key), "retry_at") or 0)

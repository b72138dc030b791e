"""The backlog collector on real Redis: what is waiting, held, quarantined, and how old."""

from __future__ import annotations

import time

import pytest
import redis

from shared.format.messages import Message
from shared.state import keys
from shared.state.backlog import read_backlog
from shared.state.buffers import AgentRef, Buffers, ConversationSettings
from shared.state.conversations import ConversationRef
from tests.support.buffer_save import IncomingMessage, buffer_save

IDLE = ConversationSettings(min_chars=100_000, gap_seconds=3600, idle_seconds=3600)
IMPORT = ConversationSettings(100_000, 3600, 3600, idle_timer=False)


def buffer(client: redis.Redis, agent: str, channel: str, ages: list[float],
           conv: ConversationSettings = IDLE) -> None:  # fmt: skip
    buffers = Buffers(client, dedupe_ttl_seconds=60, lease_seconds=30)
    now = int(time.time() * 1000)
    ref = ConversationRef(collection=f"mem_{agent.lower()}", source="discord", channel_id=channel)
    incoming = [
        IncomingMessage(ref, Message(f"{channel}-{i}", "hello", now - int(age * 1000), "A"))
        for i, age in enumerate(ages)
    ]
    buffer_save(buffers, AgentRef(agent, ref.collection), incoming, conv)


@pytest.fixture
def client(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url)


def test_an_empty_deployment_has_no_backlog(client: redis.Redis) -> None:
    backlog = read_backlog(client, str)
    assert (backlog.due, backlog.scheduled, backlog.quarantined, backlog.held) == (0, 0, 0, 0)
    assert backlog.oldest_message_age_seconds == 0 and backlog.buffered == {}


def test_messages_per_agent_and_the_oldest_unwritten_one(client: redis.Redis) -> None:
    buffer(client, "Polaris", "c1", [120, 60])
    buffer(client, "Polaris", "c2", [30])
    buffer(client, "Nova", "c3", [10])
    buffer(client, "Nova", "old-import", [86400 * 365], IMPORT)  # a chat's own old dates
    backlog = read_backlog(client, lambda name: name.upper())
    assert backlog.buffered == {"POLARIS": 3, "NOVA": 2}
    assert backlog.unwritten == {"POLARIS": 3, "NOVA": 2}
    assert 119 < backlog.oldest_message_age_seconds < 130
    assert (backlog.scheduled, backlog.due) == (4, 0)  # waiting for their idle timers


def test_written_open_chunks_are_not_backlog_and_due_ones_are(client: redis.Redis) -> None:
    buffer(client, "Polaris", "c1", [5, 4])
    conversation = "mem_polaris:discord:chan%3Dc1"
    client.hset(keys.meta(conversation), "written", 2)  # its open chunk is stored
    client.zadd(keys.DUE, {conversation: int(time.time() * 1000) - 3000})
    backlog = read_backlog(client, str)
    assert backlog.buffered == {"Polaris": 2} and backlog.unwritten == {"Polaris": 0}
    assert backlog.due == 1 and 2.9 < backlog.overdue_seconds < 10


def test_held_and_quarantined_conversations_are_counted(client: redis.Redis) -> None:
    buffer(client, "Polaris", "c1", [1])
    buffer(client, "Polaris", "c2", [1])
    client.set(keys.blocked("mem_polaris"), "collection of another model")
    client.zadd(keys.QUARANTINE, {"mem_nova:discord:chan%3Dx": 1, "mem_nova:discord:chan%3Dy": 2})
    backlog = read_backlog(client, str)
    assert (backlog.held, backlog.quarantined) == (2, 2)

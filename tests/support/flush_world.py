"""A flush's world for tests: real Redis, the embedding test server and a store, with helpers to
save, claim and read back; the `world`, `make_world` and `settings` fixtures."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from shared.agents import AgentConfig, Agents
from shared.format.messages import Message
from shared.runtime import Runtime
from shared.settings import Settings
from shared.state import keys
from shared.state.buffers import AgentRef, Claim, ConversationSettings
from shared.state.conversations import ConversationRef
from tests.support.buffer_save import IncomingMessage, buffer_save
from tests.support.embedding_server import EmbeddingServer
from tests.support.factories import BASE_TS
from tests.support.stack import stack_settings
from workers.flush import FlushDeps, FlushReport, flush

IDLE = 0.5

SOURCE = "discord"

HALF = "x" * 262  # with "Alex" a message of 268: two of them close a chunk


def message(mid: str, text: str, n: int) -> Message:
    return Message(id=mid, text=text, ts=BASE_TS + n * 1000, speaker="Alex", user_id="111")


@dataclass
class World:
    runtime: Runtime
    deps: FlushDeps

    @property
    def redis(self) -> Any:
        return self.runtime.redis

    def agent(self, name: str) -> AgentConfig:
        return self.runtime.agents.get(name)

    def save(self, agent: str, channel: str, messages: Sequence[Message]) -> str:
        """Buffer messages as /save does; returns the conversation key."""
        config = self.agent(agent)
        ref = ConversationRef(collection=config.collection_name, source=SOURCE, channel_id=channel)
        conv = ConversationSettings(
            min_chars=config.chunk_min_chars,
            gap_seconds=config.chunk_gap_seconds,
            idle_seconds=config.idle_flush_seconds,
        )
        incoming = [IncomingMessage(ref, m, guild_id="g1") for m in messages]
        who = AgentRef(config.name, config.collection_name)
        counts = buffer_save(self.runtime.buffers, who, incoming, conv)
        assert counts.accepted == len(messages)
        return ref.key

    def make_due(self) -> None:
        members = self.redis.zrange(keys.DUE, 0, -1)
        if members:
            self.redis.zadd(keys.DUE, dict.fromkeys(members, 0))

    def claim_all(self) -> list[Claim]:
        self.make_due()
        return self.runtime.buffers.claim_due(100)

    def flush_when_due(self, timeout: float = 5.0) -> FlushReport:
        """Wait for the due set (the idle timer) to hand out conversations, then flush them."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            claims = self.runtime.buffers.claim_due(100)
            if claims:
                return flush(claims, self.deps)
            time.sleep(0.02)
        raise AssertionError("nothing became due")

    def points(self, collection: str) -> dict[str, tuple[dict[str, Any], list[float]]]:
        """Stored points by id: (payload, vector)."""
        if self.runtime.store.collection(collection) is None:
            return {}
        # the unnamed dense vector (beside the BM25 one); st-qdrant-memory reads only this
        return {
            p.id: (p.payload, list(p.vector or []))
            for p in self.runtime.store.iter_points(collection)
        }

    def buffered(self, conversation: str) -> list[str]:
        raw = self.redis.lrange(keys.buffer(conversation), 0, -1)
        return [Message.from_json(item).id for item in raw]

    def meta(self, conversation: str) -> dict[str, str]:
        raw = self.redis.hgetall(keys.meta(conversation))
        return {k.decode(): v.decode() for k, v in raw.items()}

    def due(self, conversation: str) -> float | None:
        return self.redis.zscore(keys.DUE, conversation)


@pytest.fixture
def settings(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Settings:
    return stack_settings(redis_url, embeddings.url, tmp_path)


@pytest.fixture
def make_world(settings: Settings) -> Iterator[Callable[..., World]]:
    opened: list[Runtime] = []

    def make(*agents: AgentConfig) -> World:
        runtime = Runtime.build(settings, agents=Agents(list(agents), accept_unlisted=False))
        opened.append(runtime)
        return World(runtime, FlushDeps.of(runtime))

    yield make
    for runtime in opened:
        runtime.close()


@pytest.fixture
def world(make_world: Callable[..., World]) -> World:
    return make_world(
        AgentConfig(name="mythos", idle_flush_seconds=IDLE),
        AgentConfig(name="polaris", idle_flush_seconds=IDLE),
    )

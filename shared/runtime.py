"""Builds the long-lived clients (Redis, Qdrant, embedder) from settings, once per process."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import redis
import redis.asyncio

from shared.agents import Agents, load_agents
from shared.embedding.embedder import Embedder, make_embedder
from shared.ops.metered import instrument_embedder, instrument_store
from shared.settings import Settings
from shared.state.buffers import Buffers
from shared.state.dead_letters import DeadLetters
from shared.state.quarantine import Quarantine
from shared.state.upgrade import upgrade_at_start
from shared.store.interface import Store
from shared.store.open import open_store


def _redis_options(settings: Settings) -> dict[str, Any]:
    if not settings.redis_url:
        raise ValueError("REDIS_URL is not set (memory-pool serve starts an embedded Redis)")
    return {
        "socket_timeout": settings.redis_timeout_seconds,
        "socket_connect_timeout": settings.redis_timeout_seconds,
        "health_check_interval": 30,
    }


def redis_client(settings: Settings) -> redis.Redis:
    options = _redis_options(settings)
    return redis.Redis.from_url(settings.redis_url or "", **options)


def async_redis_client(settings: Settings) -> redis.asyncio.Redis:
    """For the API's event loop; create it inside the loop that will use it."""
    options = _redis_options(settings)
    return redis.asyncio.Redis.from_url(settings.redis_url or "", **options)


@dataclass
class Runtime:
    """The clients a process holds; the API and the workers each build one."""

    settings: Settings
    agents: Agents
    redis: redis.Redis
    buffers: Buffers
    store: Store
    embedder: Embedder
    dead_letters: DeadLetters
    quarantine: Quarantine = field(init=False)

    def __post_init__(self) -> None:
        self.quarantine = Quarantine(self.redis)

    @classmethod
    def build(cls, settings: Settings, *, agents: Agents | None = None) -> Runtime:
        client = redis_client(settings)
        agents = agents if agents is not None else load_agents(settings.config_path)
        # Every process may be the first of a new version: state of an older one is re-keyed
        # before anything reads it (one process does it, the others wait).
        upgrade_at_start(client, agents)
        return cls(
            settings=settings,
            agents=agents,
            redis=client,
            buffers=Buffers(
                client,
                dedupe_ttl_seconds=settings.dedupe_ttl_seconds,
                lease_seconds=settings.lease_seconds,
            ),
            store=instrument_store(open_store(settings)),
            embedder=instrument_embedder(make_embedder(settings)),
            dead_letters=DeadLetters(client),
        )

    def close(self) -> None:
        self.embedder.close()
        self.store.close()
        self.redis.close()

"""A whole stack (tests/support/stack.py) on each Store: "edge" (Qdrant Edge, as `memory-pool
serve` keeps it) and "server" (qdrant-client over the REST test server)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from shared.agents import Agents
from tests.support.embedding_server import EmbeddingServer
from tests.support.qdrant_server import QdrantTestServer
from tests.support.redis_server import RedisServer
from tests.support.stack import Stack, running_stack, stack_settings


@dataclass(frozen=True)
class Services:
    redis_url: str
    embedding_url: str


def fresh_services(redis_server: RedisServer, embedding_server: EmbeddingServer) -> Services:
    """The session's Redis emptied and its embedding server without faults, for a stack that a
    module's tests share (each of its params starts from nothing, as a function-scoped test)."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    embedding_server.clear_faults()
    return Services(redis_server.url, embedding_server.url)


@contextmanager
def stack_on(
    kind: str, redis_url: str, embedding_url: str, folder: Path, agents: Agents, **settings: Any
) -> Iterator[Stack]:
    """`settings`: environment overrides (MEMORY_POOL_MAX_BODY_BYTES=...)."""
    with ExitStack() as stacked:
        extra: dict[str, Any] = dict(settings)
        if kind == "server":
            server = stacked.enter_context(QdrantTestServer(folder / "qdrant"))
            extra["QDRANT_URL"] = server.url
        settings = stack_settings(redis_url, embedding_url, folder, **extra)
        yield stacked.enter_context(running_stack(settings, agents))

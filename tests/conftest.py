"""Session-wide real services for the tests: a Redis server and an embedding server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.support.embedding_server import EMBEDDING_DIMS, EmbeddingServer
from tests.support.redis_server import RedisServer


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> Iterator[str]:
    """The session Redis, emptied for each test."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    yield redis_server.url


@pytest.fixture(scope="session")
def embedding_server() -> Iterator[EmbeddingServer]:
    with EmbeddingServer(dims=EMBEDDING_DIMS) as server:
        yield server


@pytest.fixture
def embeddings(embedding_server: EmbeddingServer) -> Iterator[EmbeddingServer]:
    """The session embedding server with a clean log and no faults left by another test."""
    embedding_server.clear_faults()
    embedding_server.reset_log()
    yield embedding_server
    embedding_server.clear_faults()

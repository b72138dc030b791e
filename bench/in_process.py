"""What a bench that runs the app in its own process needs: a Redis of its own, and the
environment the app reads (a fresh data folder, the local embedding model)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from bench.stack import LOCAL_MODEL

if TYPE_CHECKING:
    from tests.support.redis_server import RedisServer


@contextmanager
def app_redis() -> Iterator[RedisServer]:
    """Start a Redis, point the app's settings at it, stop it on the way out."""
    from tests.support.redis_server import RedisServer

    server = RedisServer().start()
    try:
        os.environ.update(
            REDIS_URL=server.url,
            MEMORY_POOL_DATA_DIR=tempfile.mkdtemp(prefix="mp-bench-"),
            EMBEDDING_PROVIDER="local",
            EMBEDDING_MODEL_PATH=str(LOCAL_MODEL),
        )
        yield server
    finally:
        server.stop()


def discord_bodies(requests: int) -> tuple[list[bytes], list[bytes]]:
    """Every channel's first window (what the channels sent before), then `requests` Discord
    turns (30 messages, 28 re-sent), as /save bodies."""
    from bench.traffic import DiscordTraffic

    traffic = DiscordTraffic(seed=1)
    warm = [json.dumps(traffic.fill(channel)).encode() for channel in traffic.channels]
    bodies = []
    for _ in range(requests):
        turn = traffic.turn()
        bodies.append(json.dumps(turn[0] if isinstance(turn, tuple) else turn.body).encode())
    return warm, bodies

"""A running stack reachable over real HTTP: uvicorn on a free port next to the Celery worker."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis
import uvicorn
import yaml

from api.app import create_app
from shared.agents import load_agents
from tests.support.embedding_server import EmbeddingServer
from tests.support.redis_server import RedisServer, free_port
from tests.support.stack import Stack, running_stack, stack_settings

START_TIMEOUT = 10.0


@dataclass
class Live:
    stack: Stack
    url: str


@contextmanager
def _uvicorn(stack: Stack) -> Iterator[str]:
    port = free_port()
    app = create_app(stack.settings, runtime=stack.runtime)
    # ws="none": no websocket module to import (and none of its deprecation warnings).
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", ws="none")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def live_memory_pool(
    redis_url: str, embedding_url: str, data_dir: Path, agents_file: dict[str, object]
) -> Iterator[Live]:
    """memory-pool with these agents (written as an agents file), served on a free port."""
    path = data_dir / "agents.yaml"
    path.write_text(yaml.safe_dump(agents_file), encoding="utf-8")
    settings = stack_settings(redis_url, embedding_url, data_dir, MEMORY_POOL_CONFIG=str(path))
    with running_stack(settings, load_agents(path)) as stack, _uvicorn(stack) as url:
        yield Live(stack, url)


@contextmanager
def fresh_live_memory_pool(
    redis_server: RedisServer,
    embedding_server: EmbeddingServer,
    data_dir: Path,
    agents_file: str,
) -> Iterator[Live]:
    """`live_memory_pool` on the session's Redis (emptied) and embedding server (no faults)."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    embedding_server.clear_faults()
    with live_memory_pool(redis_server.url, embedding_server.url, data_dir, agents_file) as up:
        yield up

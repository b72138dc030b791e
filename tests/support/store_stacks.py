"""A whole stack (tests/support/stack.py) on each Store: "edge" (Qdrant Edge, as `memory-pool
serve` keeps it) and "server" (qdrant-client over the REST test server)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from shared.agents import Agents
from tests.support.qdrant_server import QdrantTestServer
from tests.support.stack import Stack, running_stack, stack_settings


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

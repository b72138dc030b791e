"""What the Hermes tests share: the agent, and the provider as Hermes' own loader gives it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from client.http_client import MemoryPoolClient
from tests.support.live_server import Live

AGENT = "hermes-test"
AGENTS_FILE = {"agents": [{"name": AGENT, "self_speaker": "Hermes"}]}
HEADER = "\n[Past chat memories]\n\n"
PLUGIN = "memory-pool"
MODULE = f"_hermes_user_memory.{PLUGIN}"
PACKAGE = "memory_pool_hermes"  # the pip distribution's
ENV_VARS = ("MEMORY_POOL_URL", "MEMORY_POOL_AGENT", "MEMORY_POOL_TIMEOUT", "MEMORY_POOL_API_KEY")


def forget_modules(*prefixes: str) -> None:
    """Drop loaded plugin modules, so the next test loads its own install."""
    for name in [n for n in sys.modules if any(n == p or n.startswith(f"{p}.") for p in prefixes)]:
        del sys.modules[name]


def load_provider() -> Any:
    """The provider as Hermes gets it when config.yaml says `memory.provider: memory-pool`."""
    from plugins.memory import load_memory_provider

    provider = load_memory_provider(PLUGIN)
    assert provider is not None, "Hermes could not load the installed plugin"
    return provider


def configure(home: Path, url: str, timeout: str = "3", agent: str = AGENT) -> None:
    load_provider().save_config({"url": url, "agent": agent, "timeout": timeout}, str(home))


def initialized(home: Path, session_id: str, **context: Any) -> Any:
    provider = load_provider()
    kwargs = {"hermes_home": str(home), "platform": "cli", "agent_context": "primary"}
    provider.initialize(session_id, **(kwargs | context))
    return provider


def stored_ids(live: Live, ids: list[str]) -> list[str]:
    with MemoryPoolClient(live.url) as client:
        return client.known_ids(AGENT, ids)

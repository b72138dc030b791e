"""The MCP tools for a key scoped to one agent that is not in the agents file (unlisted agents
accepted) and has stored nothing yet: the key alone names the agent, on both transports."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.e2e.test_mcp import call, connected
from tests.support.embedding_server import EmbeddingServer
from tests.support.serve import Served, serve_env, serving

KEYS = {"http": "newcomer-http-key-0123456789", "stdio": "newcomer-stdio-key-012345678"}
AGENTS = f"""
accept_unlisted_agents: true
api_keys:
  - name: newcomer-http
    key: "{KEYS["http"]}"
    agents: [newcomer-http]
  - name: newcomer-stdio
    key: "{KEYS["stdio"]}"
    agents: [newcomer-stdio]
agents:
  - name: mythos
    self_speaker: Mythos
"""


@pytest.fixture(scope="module")
def pool(
    tmp_path_factory: pytest.TempPathFactory, embedding_server: EmbeddingServer
) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("mcp-unlisted")
    (folder / "agents.yaml").write_text(AGENTS, encoding="utf-8")
    env = serve_env(embedding_server) | {"MEMORY_POOL_CONFIG": str(folder / "agents.yaml")}
    with serving(folder / "data", env, folder / "serve.log") as served:
        yield served
        assert "Traceback" not in served.log.read_text(errors="replace"), served.log_tail()


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_a_key_scoped_to_one_unlisted_new_agent_names_it(pool: Served, transport: str) -> None:
    """`memory-pool mcp` learns a scoped key's agent from GET /agents, which named only listed
    agents and those seen storing: for this key list_agents was empty and remember an
    agent_required error ("none visible to this key"), while over HTTP the same key named its
    agent for the calls but list_agents still showed none."""
    agent = f"newcomer-{transport}"

    async def scenario() -> None:
        async with connected(pool, transport, KEYS[transport]) as client:
            listed = await call(client, "list_agents")
            assert [a["name"] for a in listed["agents"]] == [agent], listed
            assert listed["default_agent"] == agent and not listed["agents"][0]["listed"]
            kept = await call(client, "remember", text="a newcomer's first note about lanterns")
            assert kept["agent"] == agent and kept["outcome"] == "stored", kept

    asyncio.run(scenario())

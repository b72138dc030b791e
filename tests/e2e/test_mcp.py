"""The MCP server with the SDK's own client, against a running `memory-pool serve` (its workers,
embedded Redis and Qdrant): over streamable HTTP at /mcp, and over stdio through `memory-pool
mcp` started as a host starts it. The same scenarios on both transports (README "MCP")."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from api.mcp.shapes import chosen_message_id
from tests.support.embedding_server import EmbeddingServer
from tests.support.serve import ROOT, Served, serve_env, serving

OPS_KEY = "ops-key-0123456789abcdef"
MYTHOS_KEY = "mythos-key-0123456789abc"
AGENTS = f"""
api_keys:
  - name: ops
    key: "{OPS_KEY}"
  - name: mythos-only
    key: "{MYTHOS_KEY}"
    agents: [mythos]
agents:
  - name: mythos
    self_speaker: Mythos
    require_key: true
  - name: polaris
    self_speaker: Polaris
    require_key: true
"""
MAX_BODY = 64 * 1024
MAX_CHARS = 20_000
TOOLS = {"recall", "remember", "forget", "list_agents"}
TRANSPORTS = ["http", "stdio"]
# The same, with the initialize handshake of the protocol versions before 2026-07-28, which the
# SDK's client negotiates only when asked to and most hosts still speak.
BOTH_ERAS = [*TRANSPORTS, "http-legacy", "stdio-legacy"]


@pytest.fixture(scope="module")
def pool(
    tmp_path_factory: pytest.TempPathFactory, embedding_server: EmbeddingServer
) -> Iterator[Served]:
    """One serve for the module, its agents behind keys (a key for all, one for mythos only)."""
    folder = tmp_path_factory.mktemp("mcp")
    (folder / "agents.yaml").write_text(AGENTS, encoding="utf-8")
    env = serve_env(embedding_server) | {
        "MEMORY_POOL_CONFIG": str(folder / "agents.yaml"),
        "MEMORY_POOL_MAX_BODY_BYTES": str(MAX_BODY),
        "MEMORY_POOL_MAX_CHARS": str(MAX_CHARS),
    }
    with serving(folder / "data", env, folder / "serve.log") as served:
        yield served
        assert "Traceback" not in served.log.read_text(errors="replace"), served.log_tail()


def url_of(pool: Served) -> str:
    return str(pool.http.base_url).rstrip("/")


@asynccontextmanager
async def connected(
    pool: Served, transport: str, key: str | None, *, agent: str | None = None, url: str = ""
) -> AsyncIterator[Client]:
    """The SDK's client on one transport: /mcp with the key as a Bearer, or `memory-pool mcp`
    spawned with --url (and --api-key, --agent); "-legacy": with the initialize handshake."""
    kind, _, era = transport.partition("-")
    mode = era or "auto"
    if kind == "http":
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            transport_cm = streamable_http_client(f"{url or url_of(pool)}/mcp", http_client=http)
            async with Client(transport_cm, mode=mode) as client:
                yield client
        return
    args = ["-m", "memory_pool.main", "mcp", "--url", url or url_of(pool)]
    args += ["--api-key", key] if key else []
    args += ["--agent", agent] if agent else []
    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "")}
    params = StdioServerParameters(command=sys.executable, args=args, env=env, cwd=ROOT)
    with (pool.data_dir.parent / "mcp-stdio.log").open("a") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
            yield client


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool's structured answer; the call must not be a tool error."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def refused(client: Client, tool: str, **arguments: Any) -> str:
    """The text of a tool error (isError), which the call must be."""
    result: CallToolResult = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    text = " ".join(getattr(block, "text", "") for block in result.content)
    assert "Traceback" not in text
    return text


def flush(pool: Served, agent: str) -> None:
    response = pool.http.post(
        f"/agents/{agent}/flush",
        params={"wait": "true"},
        headers={"Authorization": f"Bearer {OPS_KEY}"},
    )
    assert response.status_code == 200 and response.json()["done"], response.text


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_tools_are_listed_with_when_to_call_them(pool: Served, transport: str) -> None:
    async def scenario() -> None:
        async with connected(pool, transport, MYTHOS_KEY) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        for tool in tools.values():
            assert tool.description and "Call it" in tool.description, tool.name
        recall_args = set(tools["recall"].input_schema["properties"])
        assert recall_args >= {
            "agent",
            "query",
            "limit",
            "exclude_message_ids",
            "source",
            "channel_id",
            "since",
            "until",
        }
        assert tools["recall"].input_schema["required"] == ["query"]
        assert set(tools["remember"].input_schema["properties"]) >= {
            "agent",
            "text",
            "message_id",
            "speaker",
            "conversation_id",
        }
        assert set(tools["forget"].input_schema["properties"]) >= {
            "agent",
            "message_id",
            "user_id",
            "conversation_id",
            "source",
            "channel_id",
        }
        assert (
            tools["forget"].annotations is not None and tools["forget"].annotations.destructive_hint
        )

    asyncio.run(scenario())


@pytest.mark.parametrize("transport", BOTH_ERAS)
def test_remember_then_recall_then_forget(pool: Served, transport: str) -> None:
    text = f"Alex's sister Mira keeps bees on the {transport} lighthouse island"
    query = f"who keeps bees on the {transport} lighthouse island?"

    async def scenario() -> None:
        # the key is scoped to mythos: no tool call needs to name the agent
        async with connected(pool, transport, MYTHOS_KEY) as client:
            kept = await call(client, "remember", text=text)
            assert kept["agent"] == "mythos" and kept["outcome"] == "stored"
            assert kept["message_id_chosen"]
            assert kept["message_id"] == chosen_message_id(text, None, None)
            again = await call(client, "remember", text=text)
            assert again["outcome"] == "duplicate" and again["message_id"] == kept["message_id"]
            flush(pool, "mythos")
            found = await call(client, "recall", query=query)
            hits = [h for h in found["hits"] if text in h["text"]]
            assert hits, found
            today = datetime.now(UTC).strftime("%Y-%m-%d")
            assert hits[0]["date"] == today and hits[0]["speakers"] == ["Mythos"]
            assert hits[0]["source"] == "mcp" and kept["message_id"] in hits[0]["message_ids"]
            assert text in found["formatted"] and found["formatted"].startswith("\n[Past chat")
            narrowed = await call(client, "recall", query=query, source="discord", since=today)
            assert not [h for h in narrowed["hits"] if text in h["text"]]
            gone = await call(client, "forget", message_id=kept["message_id"])
            assert gone["deleted_points"] + gone["rewritten_points"] >= 1
            after = await call(client, "recall", query=query)
            assert not [h for h in after["hits"] if text in h["text"]], after

    asyncio.run(scenario())


@pytest.mark.parametrize("transport", BOTH_ERAS)
def test_remember_with_a_speaker_an_id_and_a_conversation(pool: Served, transport: str) -> None:
    text = f"the {transport} orchard by the old mill grows quinces every autumn"

    async def scenario() -> None:
        async with connected(pool, transport, OPS_KEY, agent="mythos") as client:
            # an all-agents key: over HTTP the agent is named, over stdio --agent names it
            agent = {"agent": "mythos"} if transport.startswith("http") else {}
            kept = await call(
                client,
                "remember",
                text=text,
                speaker="Alex",
                message_id=f"m-{transport}",
                conversation_id=f"c-{transport}",
                **agent,
            )
            assert kept["message_id"] == f"m-{transport}" and not kept["message_id_chosen"]
            again = await call(
                client,
                "remember",
                text=text,
                speaker="Alex",
                message_id=f"m-{transport}",
                conversation_id=f"c-{transport}",
                **agent,
            )
            assert again["outcome"] == "duplicate", again  # the same message_id, as on /save
            flush(pool, "mythos")
            found = await call(client, "recall", query=f"{transport} orchard quinces mill", **agent)
            hit = next(h for h in found["hits"] if text in h["text"])
            assert hit["speakers"] == ["Alex"] and hit["conversation_id"] == f"c-{transport}"
            forgotten = await call(
                client, "forget", source="mcp", conversation_id=f"c-{transport}", **agent
            )
            assert forgotten["deleted_points"] >= 1

    asyncio.run(scenario())


def seed_discord(pool: Served, tag: str) -> dict[str, dict[str, Any]]:
    """Three Discord messages, each in its own channel (its own chunk), by its own user, on
    2025-03-10, 2025-06-10 and 2025-09-10, written to chunks; by name a, b, c."""
    days = {"a": "2025-03-10", "b": "2025-06-10", "c": "2025-09-10"}
    messages = {
        name: {
            "message_id": f"{tag}-{name}",
            "text": f"the {tag} ferry to Vardø leaves the harbour at dawn, trip {name}",
            "ts": int(datetime.fromisoformat(f"{day}T12:00:00+00:00").timestamp() * 1000),
            "discord_user_id": f"u-{tag}-{name}",
            "speaker_name": "Alex",
            "channel_id": f"ch-{tag}-{name}",
        }
        for name, day in days.items()
    }
    answer = pool.http.post(
        "/save",
        json={"bot": "mythos", "messages": list(messages.values())},
        headers={"Authorization": f"Bearer {OPS_KEY}"},
    )
    assert answer.status_code == 202 and answer.json()["accepted"] == 3, answer.text
    flush(pool, "mythos")
    return messages


async def recalled_ids(client: Client, tag: str, **filters: Any) -> set[str]:
    found = await call(client, "recall", query=f"{tag} ferry to Vardø harbour dawn", **filters)
    return {mid for hit in found["hits"] for mid in hit["message_ids"] if mid.startswith(tag)}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_recall_filters_and_every_forget_scope(pool: Served, transport: str) -> None:
    """recall's exclude_message_ids, source, channel_id, since and until narrow as /retrieve's
    do; forget takes each scope /agents/{bot}/delete takes (user_id, source with channel_id,
    source alone; message_id and source with conversation_id are above)."""
    tag = f"filters-{transport}"
    seeded = seed_discord(pool, tag)
    a, b, c = (seeded[name]["message_id"] for name in "abc")

    async def scenario() -> None:
        async with connected(pool, transport, MYTHOS_KEY) as client:
            assert await recalled_ids(client, tag) == {a, b, c}
            found = await call(client, "recall", query=f"{tag} ferry to Vardø", source="discord")
            hit = next(h for h in found["hits"] if a in h["message_ids"])
            assert hit["date"] == "2025-03-10" and hit["speakers"] == ["Alex"]
            assert hit["channel_id"] == f"ch-{tag}-a" and hit["source"] == "discord"
            assert await recalled_ids(client, tag, exclude_message_ids=[a]) == {b, c}
            assert await recalled_ids(client, tag, source="mcp") == set()
            assert await recalled_ids(client, tag, channel_id=f"ch-{tag}-b") == {b}
            assert await recalled_ids(client, tag, until="2025-04-01") == {a}
            assert await recalled_ids(client, tag, since="2025-05-01", until="2025-07-01") == {b}
            since_ms = int(datetime(2025, 8, 1, tzinfo=UTC).timestamp() * 1000)
            assert await recalled_ids(client, tag, since=since_ms) == {c}

            gone = await call(client, "forget", user_id=f"u-{tag}-a")
            assert gone["deleted_points"] == 1, gone
            gone = await call(client, "forget", source="discord", channel_id=f"ch-{tag}-b")
            assert gone["deleted_points"] == 1, gone
            assert await recalled_ids(client, tag) == {c}
            gone = await call(client, "forget", source="discord")
            assert gone["deleted_points"] >= 1, gone
            assert await recalled_ids(client, tag) == set()

    asyncio.run(scenario())


@pytest.mark.parametrize("transport", BOTH_ERAS)
def test_a_scoped_key_cannot_reach_another_agent(pool: Served, transport: str) -> None:
    async def scenario() -> None:
        async with connected(pool, transport, OPS_KEY, agent="polaris") as ops:
            kept = await call(
                ops, "remember", text="polaris charts the northern sky each night", agent="polaris"
            )
        flush(pool, "polaris")
        async with connected(pool, transport, MYTHOS_KEY) as client:
            listed = await call(client, "list_agents")
            assert [a["name"] for a in listed["agents"]] == ["mythos"]
            assert listed["default_agent"] == "mythos"
            for tool, args in (
                ("recall", {"query": "northern sky"}),
                ("remember", {"text": "a note slipped into another agent's memory"}),
                ("forget", {"message_id": kept["message_id"]}),
                ("forget", {"source": "mcp"}),
            ):
                text = await refused(client, tool, agent="polaris", **args)
                assert "forbidden" in text and "polaris" in text, text
        async with connected(pool, transport, OPS_KEY, agent="polaris") as ops:
            still = await call(ops, "recall", query="polaris northern sky night", agent="polaris")
            assert [h for h in still["hits"] if kept["message_id"] in h["message_ids"]], still

    asyncio.run(scenario())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_bad_arguments_are_tool_errors(pool: Served, transport: str) -> None:
    async def scenario() -> None:
        async with connected(pool, transport, MYTHOS_KEY) as client:
            assert "limit" in await refused(client, "recall", query="bees", limit=0)
            assert "query" in await refused(client, "recall", limit=3)
            assert "since" in await refused(client, "recall", query="bees", since="next tuesday")
            assert "since" in await refused(client, "recall", query="bees", since=-5)
            # named by the argument the model sent, not /retrieve's query_text
            too_long_query = await refused(client, "recall", query="x" * 8001)
            assert "query:" in too_long_query and "query_text" not in too_long_query
            assert "exactly one scope" in await refused(
                client, "forget", message_id="a", user_id="b"
            )
            assert "exactly one scope" in await refused(client, "forget")
            assert "exactly one scope" in await refused(client, "forget", conversation_id="c1")
            assert "need the source" in await refused(client, "forget", user_id="u", channel_id="c")
            assert "message_id" in await refused(
                client, "remember", text="a note", message_id="a,b"
            )
            too_long = await refused(client, "remember", text="y" * (MAX_CHARS + 1))
            assert "request_too_large" in too_long and str(MAX_CHARS) in too_long
            # a key for some agents cannot tell an unknown agent from another's
            assert "forbidden" in await refused(client, "recall", query="bees", agent="nobody")
            # still serving
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
        async with connected(pool, transport, OPS_KEY) as ops:
            # two agents this key reaches, none named
            text = await refused(ops, "remember", text="whose memory is this note for?")
            assert "agent_required" in text and "mythos" in text and "polaris" in text
            assert "unknown_agent" in await refused(ops, "recall", query="bees", agent="nobody")
        async with connected(pool, transport, None) as anonymous:
            text = await refused(anonymous, "recall", query="bees", agent="mythos")
            assert "unauthorized" in text and "requires an API key" in text

    asyncio.run(scenario())


def test_stdio_without_a_running_memory_pool_answers_tool_errors(pool: Served) -> None:
    async def scenario() -> None:
        async with connected(
            pool, "stdio", None, agent="mythos", url="http://127.0.0.1:9"
        ) as client:
            assert "unreachable" in await refused(client, "recall", query="bees")

    asyncio.run(scenario())


def test_the_door_stands_before_mcp(pool: Served) -> None:
    """/mcp is behind the same host check, key check and body limit as every path, and is not
    in the OpenAPI schema."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    wrong_key = pool.http.post(
        "/mcp", json=body, headers=accept | {"Authorization": "Bearer nope-nope-nope-nope"}
    )
    assert wrong_key.status_code == 401 and wrong_key.json()["error"] == "unauthorized"
    rebound = pool.http.post("/mcp", json=body, headers=accept | {"Host": "attacker.example"})
    assert rebound.status_code == 400 and rebound.json()["error"] == "host_not_allowed"
    big = pool.http.post(
        "/mcp", content=b"x" * (MAX_BODY + 1), headers=accept | {"Content-Type": "application/json"}
    )
    assert big.status_code == 413
    assert "/mcp" not in pool.http.get("/openapi.json").json()["paths"]
    # past the door, MCP's own answers reach the client as the SDK wrote them
    key = {"Authorization": f"Bearer {MYTHOS_KEY}"}
    listed = pool.http.post("/mcp", json=body, headers=accept | key)
    assert listed.status_code == 200, listed.text
    assert {t["name"] for t in listed.json()["result"]["tools"]} == TOOLS
    unacceptable = pool.http.post("/mcp", json=body, headers={"Accept": "text/html"} | key)
    # a JSON-RPC error, not rewritten into memory-pool's {error, detail}; with a request id
    assert unacceptable.status_code == 406 and unacceptable.json()["jsonrpc"] == "2.0"
    assert unacceptable.headers["x-request-id"]
    with httpx.Client(base_url=url_of(pool), timeout=10) as http:
        assert http.get("/health").status_code == 200

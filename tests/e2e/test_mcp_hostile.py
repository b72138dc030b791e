# ruff: noqa: F811  (`pool`, the module fixture of test_mcp.py, is imported to be reused)
"""A careless or hostile caller of the MCP server, over streamable HTTP against a running serve:
raw JSON-RPC past the door, extreme arguments, agent names spelled differently. Nothing may be
a 5xx, a traceback, or reach another agent's memory (README "MCP")."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.e2e.test_mcp import MYTHOS_KEY, OPS_KEY, call, connected, pool, refused, url_of  # noqa: F401
from tests.support.not_memory_pool import serving_not_memory_pool
from tests.support.serve import Served

ACCEPT = {"Accept": "application/json, text/event-stream"}
MYTHOS = {"Authorization": f"Bearer {MYTHOS_KEY}"}


def rpc(method: str, params: dict[str, Any] | None = None, ident: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": method, "params": params or {}}


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH"])
def test_other_methods_on_mcp_are_refused_not_5xx(pool: Served, method: str) -> None:
    """A stateless server has no stream to GET and no session to DELETE: a 4xx at once, never a
    5xx, and never a GET left open and silent (each one a held connection and task)."""
    with httpx.Client(base_url=url_of(pool), timeout=10) as http:
        answer = http.request(method, "/mcp", headers=ACCEPT | MYTHOS)
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text)
    assert "Traceback" not in answer.text


@pytest.mark.parametrize(
    "content",
    [b"{", b"[]", b"null", b"42", b'{"jsonrpc": "2.0"}', b'{"jsonrpc":"2.0","id":1}', b"\xff\xfe"],
)
def test_malformed_json_rpc_is_a_4xx(pool: Served, content: bytes) -> None:
    """Garbage on /mcp gets a refusal, not a 5xx or a traceback."""
    answer = pool.http.post(
        "/mcp", content=content, headers=ACCEPT | MYTHOS | {"Content-Type": "application/json"}
    )
    assert answer.status_code < 500, (answer.status_code, answer.text)
    assert "Traceback" not in answer.text


def test_batch_json_rpc_is_not_a_5xx(pool: Served) -> None:
    """A JSON-RPC batch (dropped from MCP in 2025-06-18) is refused or answered, not a crash."""
    batch = [rpc("tools/list", ident=1), rpc("tools/list", ident=2)]
    answer = pool.http.post("/mcp", json=batch, headers=ACCEPT | MYTHOS)
    assert answer.status_code < 500, (answer.status_code, answer.text)
    assert "Traceback" not in answer.text


def test_unknown_tool_and_method_over_raw_json_rpc(pool: Served) -> None:
    """An unknown tool is an error the caller can read; an unknown method a JSON-RPC error."""
    unknown = pool.http.post(
        "/mcp",
        json=rpc("tools/call", {"name": "drop_all", "arguments": {}}),
        headers=ACCEPT | MYTHOS,
    )
    assert unknown.status_code < 500, unknown.text
    assert "Traceback" not in unknown.text
    method = pool.http.post("/mcp", json=rpc("memory/wipe"), headers=ACCEPT | MYTHOS)
    assert method.status_code < 500, method.text


def test_extreme_recall_arguments_are_tool_errors(pool: Served) -> None:
    """Huge limit, thousands of excluded ids, since after until, odd digits: each a tool error
    with memory-pool's reason, or an answer; never a crash."""

    async def scenario() -> None:
        async with connected(pool, "http", MYTHOS_KEY) as client:
            assert "limit" in await refused(client, "recall", query="bees", limit=10**12)
            assert "limit" in await refused(client, "recall", query="bees", limit=-1)
            many = [f"id-{n}" for n in range(5000)]
            result = await client.call_tool(
                "recall", {"query": "bees", "exclude_message_ids": many}
            )
            text = " ".join(getattr(block, "text", "") for block in result.content)
            assert "Traceback" not in text
            assert "since" in await refused(client, "recall", query="bees", since="9999999-01-01")
            assert "since" in await refused(client, "recall", query="bees", since=10**30)
            # superscript two passes str.isdigit but is no number
            assert "since" in await refused(client, "recall", query="bees", since="\u00b2")
            assert "until" in await refused(client, "recall", query="bees", until="-")
            # more digits than int() reads (4,300): was a reasonless error and a traceback
            assert "since" in await refused(client, "recall", query="bees", since="9" * 5000)
            assert await refused(client, "recall", query="bees", limit="many")
            assert await refused(client, "recall", query=["a", "b"])
            assert await refused(client, "recall", query="bees", exclude_message_ids="a")

    asyncio.run(scenario())


def test_extreme_remember_arguments_are_tool_errors(pool: Served) -> None:
    """Ids and names a store would choke on are refused; nothing is stored for them."""

    async def scenario() -> None:
        async with connected(pool, "http", MYTHOS_KEY) as client:
            assert await refused(client, "remember", text="a note", message_id="x" * 10_000)
            assert await refused(client, "remember", text="a note", message_id="a\x00b")
            assert await refused(client, "remember", text="a note", message_id="a\nb")
            assert await refused(client, "remember", text="a note", conversation_id="c" * 10_000)
            assert await refused(client, "remember", text="a note", conversation_id="a,b\x00")
            assert await refused(client, "remember", text=12345)
            assert await refused(client, "remember", text=None)
            long_speaker = await client.call_tool(
                "remember", {"text": "a note from someone", "speaker": "S" * 20_000}
            )
            text = " ".join(getattr(block, "text", "") for block in long_speaker.content)
            assert "Traceback" not in text

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "spelling",
    ["Polaris", "polaris.", "POLARIS", "polaris ", " polaris", "pol\u0430ris", "ＰＯＬＡＲＩＳ"],
)
def test_a_scoped_key_cannot_reach_another_agent_spelled_otherwise(
    pool: Served, spelling: str
) -> None:
    """mythos's key reaches no polaris, however the name is written, with any tool."""

    async def scenario() -> None:
        async with connected(pool, "http", MYTHOS_KEY) as client:
            for tool, args in (
                ("recall", {"query": "sky"}),
                ("remember", {"text": "a note that must not land in polaris"}),
                ("forget", {"source": "mcp"}),
            ):
                result = await client.call_tool(tool, args | {"agent": spelling})
                assert result.is_error, (tool, spelling, result.structured_content)

    asyncio.run(scenario())


def test_list_agents_with_a_scoped_key_shows_only_its_agent(pool: Served) -> None:
    """list_agents names nothing the key cannot reach."""

    async def scenario() -> None:
        async with connected(pool, "http", MYTHOS_KEY) as client:
            found = await call(client, "list_agents")
        assert [a["name"] for a in found["agents"]] == ["mythos"]
        assert found["default_agent"] == "mythos"

    asyncio.run(scenario())


def test_forget_cannot_name_the_agent_in_the_scope(pool: Served) -> None:
    """Scope fields beyond the five, or a user_id that is another agent, reach no wider."""

    async def scenario() -> None:
        async with connected(pool, "http", MYTHOS_KEY) as client:
            assert await refused(client, "forget", source="")
            assert await refused(client, "forget", message_id="")
            assert await refused(client, "forget", user_id="")
            assert await refused(client, "forget", source="mcp", channel_id="")

    asyncio.run(scenario())


def test_recall_since_after_until_is_refused(pool: Served) -> None:
    """since after until can match nothing: a caller who swapped them must hear so (a clear
    refusal), not get an empty memory that reads as "nothing was ever said"."""

    async def scenario() -> None:
        async with connected(pool, "http", MYTHOS_KEY) as client:
            text = await refused(
                client, "recall", query="bees", since="2026-05-02", until="2026-05-01"
            )
            assert "since" in text and "until" in text

    asyncio.run(scenario())
    answer = pool.http.post(
        "/retrieve",
        json={"bot": "mythos", "query_text": "bees", "since": 2_000, "until": 1_000},
        headers=MYTHOS,
    )
    assert answer.status_code == 422, answer.text


def test_stdio_pointed_at_something_else_answers_a_tool_error(pool: Served) -> None:
    """`memory-pool mcp --url` at the wrong port (a web UI answering 200 with HTML): the JSON
    decode error escaped OverHttp, so the model read "Error executing tool recall" with no
    reason and the host's log a traceback. It must say memory-pool did not answer as one."""

    async def scenario(url: str) -> None:
        async with connected(pool, "stdio", None, agent="mythos", url=url) as client:
            text = await refused(client, "recall", query="bees")
            assert url in text, text
            text = await refused(client, "remember", text="a note for a service that is not one")
            assert url in text, text

    with serving_not_memory_pool("text/html", b"<html><body>SillyTavern</body></html>") as url:
        asyncio.run(scenario(url))


@pytest.mark.parametrize("body", [b"[]", b"{}", b'{"status": "ok"}'])
def test_stdio_pointed_at_another_json_service_answers_tool_errors(
    pool: Served, body: bytes
) -> None:
    """The wrong port, where some other API answers 200 with JSON: `remember` answered
    "outcome": "duplicate" (its fallback when /save's counts are missing), telling the model
    the note was kept when nothing was; the other tools failed without a reason. Each must be
    a tool error saying what answered at the URL."""

    async def scenario(url: str) -> None:
        async with connected(pool, "stdio", None, agent="mythos", url=url) as client:
            for tool, args in (
                ("recall", {"query": "bees"}),
                ("remember", {"text": "a note for a service that is not memory-pool"}),
                ("forget", {"source": "mcp"}),
                ("list_agents", {}),
            ):
                text = await refused(client, tool, **args)
                assert f"{url} did not answer as memory-pool does" in text, (tool, text)

    with serving_not_memory_pool("application/json", body) as url:
        asyncio.run(scenario(url))


@pytest.mark.parametrize("transport", ["http", "stdio"])
@pytest.mark.parametrize("speaker", ["   ", "\t\n", "\u3000"])
def test_a_blank_speaker_is_refused_not_stored_as_someone(
    pool: Served, transport: str, speaker: str
) -> None:
    """A blank `speaker` was stored as "User": a model that meant someone learns why instead;
    nothing is stored for it."""

    async def scenario() -> None:
        async with connected(pool, transport, MYTHOS_KEY) as client:
            reason = await refused(client, "remember", text="a blank-speaker note", speaker=speaker)
            assert "speaker" in reason, reason
            found = await call(client, "recall", query="a blank-speaker note")
            assert not any("blank-speaker" in hit["text"] for hit in found["hits"])

    asyncio.run(scenario())

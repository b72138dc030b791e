"""`memory-pool mcp`: the MCP tools over stdio, for hosts that start a process (a desktop
assistant's mcpServers entry). Each tool calls a running memory-pool's HTTP API with the Python
client, so the server there runs the one recall, save and delete code, under the key given."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Annotated, Any

import httpx
import typer
from anyio import to_thread

from client.http_client import DEFAULT_URL, MemoryPoolClient, MemoryPoolError

if TYPE_CHECKING:  # the MCP SDK is imported only by this command, not by every other one
    from api.mcp.backend import ToolFailure

UrlOption = Annotated[
    str, typer.Option("--url", envvar="MEMORY_POOL_URL", help="The running memory-pool.")
]
AgentOption = Annotated[
    str | None,
    typer.Option(
        "--agent",
        envvar="MEMORY_POOL_AGENT",
        help="The agent a tool call without `agent` is for (then the model need not name it).",
    ),
]
KeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        envvar="MEMORY_POOL_API_KEY",
        help="Sent as Authorization: Bearer (needed where the agents file has api_keys).",
    ),
]
# under a tenth of a second no answer comes back, and every tool call would blame memory-pool
MIN_TIMEOUT_SECONDS = 0.1
TimeoutOption = Annotated[
    float,
    typer.Option(
        "--timeout",
        min=MIN_TIMEOUT_SECONDS,
        help="Seconds to wait for each answer of memory-pool (at least 0.1).",
    ),
]


class OverHttp:
    """The MCP tools' backend in this process: memory-pool's HTTP API through the client, in
    a worker thread (the client is synchronous; the stdio loop is not)."""

    def __init__(self, client: MemoryPoolClient, url: str, agent: str | None) -> None:
        self.client = client
        self.url = url
        self.agent = agent

    def default_agent(self) -> str | None:
        return self.agent

    async def _answer(self, call: Callable[[], Any], needs: str) -> Any:
        """The call's answer, which must hold `needs` (see _holds): a 2xx from something else
        at the URL is no answer (a `remember` read `{}` as a duplicate: a note kept)."""
        try:
            answer = await to_thread.run_sync(call)
        except MemoryPoolError as exc:
            raise _failure(exc.error, exc.detail) from None
        except httpx.HTTPError as exc:
            raise _unreachable(self.url, exc) from None
        except (ValueError, KeyError, TypeError) as exc:  # a 2xx that is not memory-pool's JSON
            raise self._foreign(f"{type(exc).__name__}: {exc}") from None
        if not _holds(answer, needs):
            raise self._foreign(f"no {needs} in {str(answer)[:100]}")
        return answer

    def _foreign(self, reason: str) -> ToolFailure:
        return _failure("unreachable", f"{self.url} did not answer as memory-pool does ({reason})")

    async def retrieve(self, body: dict[str, Any]) -> dict[str, Any]:
        options = dict(body)
        bot, query = options.pop("bot"), options.pop("query_text")
        excluded = options.pop("exclude_message_ids", ())
        call = partial(self.client.retrieve, bot, query, exclude_message_ids=excluded, **options)
        return dict(await self._answer(call, "hits"))

    async def save(self, body: dict[str, Any]) -> dict[str, Any]:
        call = partial(self.client.save, body["bot"], body["messages"], source=body.get("source"))
        return dict(await self._answer(call, "accepted"))

    async def delete(self, agent: str, scope: dict[str, Any]) -> dict[str, Any]:
        call = partial(self.client.delete, agent, **scope)
        return dict(await self._answer(call, "deleted_points"))

    async def agents(self) -> dict[str, Any]:
        return {"agents": await self._answer(self.client.agents, "agents")}


def _holds(answer: Any, needs: str) -> bool:
    """Whether an answer is memory-pool's: a JSON object with the key `needs`, or for "agents"
    (/agents, whose list the client takes out) a list of objects with a name."""
    if needs == "agents":
        return isinstance(answer, list) and all(
            isinstance(entry, dict) and "name" in entry for entry in answer
        )
    return isinstance(answer, dict) and needs in answer


def _failure(code: str, detail: str) -> ToolFailure:
    from api.mcp.backend import ToolFailure

    return ToolFailure(code, detail)


def _unreachable(url: str, exc: httpx.HTTPError) -> ToolFailure:
    reason = str(exc) or type(exc).__name__
    return _failure(
        "unreachable", f"memory-pool at {url} did not answer ({reason}); is it running?"
    )


def mcp(
    url: UrlOption = DEFAULT_URL,
    agent: AgentOption = None,
    api_key: KeyOption = None,
    timeout: TimeoutOption = 30.0,
) -> None:
    """Serve memory-pool's MCP tools (recall, remember, forget, list_agents) over stdio, for a
    host that starts this process; they call the memory-pool running at --url."""
    from api.mcp.tools import build_server

    # stdout carries the protocol: every log line goes to stderr
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
    with MemoryPoolClient(url, api_key=api_key, timeout=timeout) as client:
        backend = OverHttp(client, url, agent or None)
        build_server(lambda _ctx: backend).run("stdio")


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp)

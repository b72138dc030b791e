"""What the MCP tools call: memory-pool's HTTP API as four calls taking and answering its JSON
bodies, and the one failure the tools report."""

from __future__ import annotations

from typing import Any, Protocol

from mcp.server.mcpserver.exceptions import ToolError


class ToolFailure(ToolError):
    """memory-pool refused or could not answer: the model reads `code: detail` as the tool's
    error (isError), never a traceback."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


class Backend(Protocol):
    """memory-pool's HTTP API for one caller (its key): each call takes the body the endpoint
    takes and answers the body it answers, or raises ToolFailure with the endpoint's error code
    and detail."""

    def default_agent(self) -> str | None:
        """The agent a tool call without `agent` is for, when the caller's setup names one
        (`memory-pool mcp --agent`, or a key scoped to one agent)."""
        ...

    async def retrieve(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /retrieve."""
        ...

    async def save(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /save."""
        ...

    async def delete(self, agent: str, scope: dict[str, Any]) -> dict[str, Any]:
        """POST /agents/{agent}/delete."""
        ...

    async def agents(self) -> dict[str, Any]:
        """GET /agents."""
        ...

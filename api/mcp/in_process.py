"""The backend of the MCP server mounted at /mcp: each tool call runs the HTTP API's own route
code (the same models, limits, key rules and errors) with the HTTP request that carried the
call, so its key reaches exactly the agents it reaches on /save, /retrieve and the rest."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from mcp.server.mcpserver import Context
from pydantic import ValidationError

from api.auth import request_key
from api.deps import agent_for, get_agent_calls
from api.errors import listed_errors
from api.mcp.backend import ToolFailure
from api.routes.agents import DeleteRequest, delete_scope
from api.routes.memories import list_agents
from api.routes.retrieve import retrieve
from api.routes.save import save_messages
from api.schemas import RetrieveRequest, SaveRequest
from shared.errors import MemoryPoolError, UpstreamUnavailable
from shared.runtime import Runtime

log = logging.getLogger(__name__)


@contextmanager
def reasons() -> Iterator[None]:
    """What the routes raise, as the tool error the same request gets over HTTP ({error,
    detail}); anything unforeseen is logged with its traceback and named only by its type."""
    try:
        yield
    except ToolFailure:
        raise
    except (ValidationError, RequestValidationError) as exc:
        raise ToolFailure("invalid_request", listed_errors(list(exc.errors()))) from None
    except MemoryPoolError as exc:
        raise ToolFailure(exc.code, str(exc)) from None
    except redis.RedisError as exc:
        raise ToolFailure(UpstreamUnavailable.code, f"Redis is unavailable: {exc}") from None
    except Exception as exc:
        log.exception("unexpected error in an MCP tool", exc_info=exc)
        raise ToolFailure("internal_error", f"{type(exc).__name__}: see the server log") from None


class InProcess:
    """The HTTP API's routes for the request that carried one tool call."""

    def __init__(self, request: Request) -> None:
        self.request = request
        self.runtime: Runtime = request.app.state.runtime

    def default_agent(self) -> str | None:
        """The agent of a key scoped to exactly one."""
        with reasons():
            key = request_key(self.runtime.agents, self.request.headers)
        if key is not None and key.agents is not None and len(key.agents) == 1:
            return key.agents[0]
        return None

    async def retrieve(self, body: dict[str, Any]) -> dict[str, Any]:
        with reasons():
            wanted = RetrieveRequest.model_validate(body)
            found = await retrieve(wanted, self.request, self.runtime)
            return found.model_dump(mode="json")

    async def save(self, body: dict[str, Any]) -> dict[str, Any]:
        with reasons():
            wanted = SaveRequest.model_validate(body)
            counts = await save_messages(wanted, self.request, self.runtime)
            return counts.model_dump(mode="json")

    async def delete(self, agent: str, scope: dict[str, Any]) -> dict[str, Any]:
        with reasons():
            # the agent first, as the route's dependency: a key out of scope learns nothing more
            found = agent_for(agent, self.runtime, self.request)
            wanted = DeleteRequest.model_validate(scope)
            run = await get_agent_calls(found, self.request)  # the route's share too
            deleted = await delete_scope(wanted, found, self.runtime, run)
            return deleted.model_dump(mode="json")

    async def agents(self) -> dict[str, Any]:
        with reasons():
            return (await list_agents(self.runtime, self.request)).model_dump(mode="json")


def connect(ctx: Context) -> InProcess:
    """The backend for a tool call that came over HTTP (the mounted server has no other)."""
    request = ctx.request_context.request
    if not isinstance(request, Request):
        raise ToolFailure("internal_error", "this tool call carries no HTTP request")
    return InProcess(request)

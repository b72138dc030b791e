"""Typed FastAPI dependencies: the process runtime and what routes take from it."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from api.auth import check_global_access, resolve_agent
from shared.agents import AgentConfig
from shared.runtime import Runtime

# Dependencies that do no I/O are `async def`: FastAPI runs a plain `def` dependency in its
# threadpool, a hand-off that cost /save measurable CPU (BENCHMARKS.md, section 1).


async def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def agent_for(name: str, runtime: Runtime, request: Request) -> AgentConfig:
    """The agent a request names; 404 when unknown, 401/403 when its key is missing."""
    return resolve_agent(runtime.agents, name, request.headers)


async def get_agent(bot: str, runtime: RuntimeDep, request: Request) -> AgentConfig:
    """The agent named in the path."""
    return agent_for(bot, runtime, request)


async def require_global_access(runtime: RuntimeDep, request: Request) -> None:
    """Endpoints spanning all agents need a key valid for every agent, once keys exist."""
    check_global_access(runtime.agents, request.headers)


AgentDep = Annotated[AgentConfig, Depends(get_agent)]

GlobalAccess = Depends(require_global_access)

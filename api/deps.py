"""Typed FastAPI dependencies: the process runtime and what routes take from it."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from api.auth import check_access
from shared.agents import AgentConfig
from shared.runtime import Runtime


def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def get_agent(bot: str, runtime: RuntimeDep, request: Request) -> AgentConfig:
    """The agent named in the path; 404 when unknown, 401/403 when its key is missing."""
    agent = runtime.agents.get(bot)
    check_access(runtime.agents, bot, request.headers)
    return agent


def agent_for(name: str, runtime: Runtime, request: Request) -> AgentConfig:
    """The same checks for an agent named in the body (/save, /retrieve)."""
    return get_agent(name, runtime, request)


def require_global_access(runtime: RuntimeDep, request: Request) -> None:
    """Endpoints spanning all agents need a key valid for every agent, once keys exist."""
    check_access(runtime.agents, None, request.headers)


AgentDep = Annotated[AgentConfig, Depends(get_agent)]

GlobalAccess = Depends(require_global_access)

"""Typed FastAPI dependencies: the process runtime and what routes take from it."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from shared.agents import AgentConfig
from shared.runtime import Runtime


def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def get_agent(bot: str, runtime: RuntimeDep) -> AgentConfig:
    """The agent named in the path; 404 when unknown (and unlisted agents are refused)."""
    return runtime.agents.get(bot)


AgentDep = Annotated[AgentConfig, Depends(get_agent)]

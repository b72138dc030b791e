"""Typed FastAPI dependencies: the process runtime and what routes take from it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, cast

from fastapi import Depends, Request

from api.agent_threads import AgentCalls
from api.auth import check_global_access, resolve_agent
from shared.agents import AgentConfig
from shared.runtime import Runtime

if TYPE_CHECKING:  # the app's parts, for their types only (api.app imports this module's users)
    from prometheus_client import CollectorRegistry

    from api.agent_threads import AgentShares
    from api.metrics import ApiMeters
    from api.openai_compat.service import EmbeddingSlots
    from api.recall.lexical import LexicalCollections
    from api.recall.query_cache import QueryCache
    from shared.state.agent_names import AgentNames
    from shared.state.buffers import AsyncSaver

# Dependencies that do no I/O are `async def`: FastAPI runs a plain `def` dependency in its
# threadpool, a hand-off that cost /save measurable CPU (BENCHMARKS.md, section 1).


def runtime_of(request: Request) -> Runtime:
    return cast("Runtime", request.app.state.runtime)


async def get_runtime(request: Request) -> Runtime:
    return runtime_of(request)


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


# The parts api/app.py keeps on app.state, typed. Plain functions, not Depends: /save is the hot
# path, and each FastAPI dependency costs a resolution step per request.
def saver(request: Request) -> AsyncSaver:
    return cast("AsyncSaver", request.app.state.saver)


def agent_names(request: Request) -> AgentNames:
    return cast("AgentNames", request.app.state.names)


def meters(request: Request) -> ApiMeters | None:
    """None when metrics are off (MEMORY_POOL_METRICS=false)."""
    return cast("ApiMeters | None", request.app.state.meters)


def agent_shares(request: Request) -> AgentShares:
    """Each agent's shares of the API's threads (api/agent_threads.py)."""
    return cast("AgentShares", request.app.state.agent_shares)


def query_cache(request: Request) -> QueryCache:
    return cast("QueryCache", request.app.state.query_cache)


def embedding_slots(request: Request) -> EmbeddingSlots:
    return cast("EmbeddingSlots", request.app.state.embedding_slots)


def lexical(request: Request) -> LexicalCollections:
    return cast("LexicalCollections", request.app.state.lexical)


def metrics_registry(request: Request) -> CollectorRegistry:
    return cast("CollectorRegistry", request.app.state.metrics_registry)


AgentDep = Annotated[AgentConfig, Depends(get_agent)]


async def get_agent_calls(agent: AgentDep, request: Request) -> AgentCalls:
    """The request's calls into the store and Redis, in its agent's operations share: one
    agent's burst of deletes or viewer pages holds a few of the API's threads, not all."""
    return AgentCalls(agent_shares(request).operations, agent.collection_name)


AgentCallsDep = Annotated[AgentCalls, Depends(get_agent_calls)]

GlobalAccess = Depends(require_global_access)

"""Which agent a /qdrant call reaches: a collection is an agent's (the agents file decides which
names are accepted), reached with st-qdrant-memory's `api-key` header by the same rules as
every other endpoint (api/auth.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from api.auth import presented_key, request_key, resolve_agent
from api.qdrant.shape import QdrantRefusal, collection_missing
from shared.agents import AgentConfig, Agents
from shared.errors import Forbidden, MemoryPoolError, Unauthorized

# The header st-qdrant-memory sends its Qdrant key in.
QDRANT_KEY_HEADER = "api-key"


@dataclass(frozen=True, slots=True)
class Target:
    """The collection a call names and the agent it is."""

    agent: AgentConfig
    collection: str


def key_headers(headers: Mapping[str, str]) -> Mapping[str, str]:
    """The request's headers with st-qdrant-memory's `api-key` read as `X-API-Key` (when
    neither `Authorization: Bearer` nor `X-API-Key` is there to take precedence)."""
    given = headers.get(QDRANT_KEY_HEADER)
    if given and presented_key(headers) is None:
        return {"x-api-key": given}
    return headers


def target(agents: Agents, collection: str, headers: Mapping[str, str]) -> Target:
    """The agent whose collection this is, if the request may reach it: 401/403 as for the
    agent's own endpoints, 404 for a collection that is no acceptable agent's."""
    headers = key_headers(headers)
    name = agents.name_for_collection(collection)
    if name is None:
        _no_agent(agents, headers)
        raise collection_missing(collection)
    agent = resolve_agent(agents, name, headers)
    if agent.collection_name != collection:
        # a listed agent spelled like this keeps another collection: nobody reaches this one
        raise collection_missing(collection)
    return Target(agent, collection)


def _no_agent(agents: Agents, headers: Mapping[str, str]) -> None:
    """As resolve_agent answers for an unknown agent once keys exist: a caller that could not
    reach a protected collection cannot tell a missing one from it either."""
    key = request_key(agents, headers)
    if not agents.api_keys or (key is not None and key.all_agents):
        return
    if key is None:
        raise Unauthorized("this collection requires an API key (the `api-key` header)")
    raise Forbidden(f"the API key {key.name!r} is not allowed for this collection")


def reachable(agents: Agents, names: list[str], headers: Mapping[str, str]) -> list[str]:
    """The collections of `names` this request may reach."""
    found = []
    for name in names:
        try:
            target(agents, name, headers)
        except (MemoryPoolError, QdrantRefusal):
            continue
        found.append(name)
    return found

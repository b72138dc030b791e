"""Optional API keys: which requests may reach which agent's endpoints."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from shared.agents import AgentConfig, Agents, ApiKey
from shared.errors import Forbidden, Unauthorized, UnknownAgent


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key a request carries: `Authorization: Bearer <key>` or `X-API-Key: <key>`."""
    authorization = headers.get("authorization", "")
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return headers.get("x-api-key") or None


def find_key(agents: Agents, key: str) -> ApiKey | None:
    """The configured key equal to `key`, compared in constant time against every key, so
    timing does not reveal a near match."""
    found = None
    for candidate in agents.api_keys:
        if hmac.compare_digest(candidate.key.encode(), key.encode()):
            found = candidate
    return found


def request_key(agents: Agents, headers: Mapping[str, str]) -> ApiKey | None:
    """The valid key a request presents, None when it presents none; 401 for an invalid one."""
    key = presented_key(headers)
    if key is None:
        return None
    found = find_key(agents, key)
    if found is None:
        raise Unauthorized("the API key is not valid")
    return found


def _needs_key(name: str) -> Unauthorized:
    return Unauthorized(
        f"agent {name!r} requires an API key (Authorization: Bearer <key> or X-API-Key)"
    )


def resolve_agent(agents: Agents, name: str, headers: Mapping[str, str]) -> AgentConfig:
    """The agent a request names, if the request may reach it. Access is judged on the agent's
    collection, so every spelling of a protected agent is protected. Once keys exist, a caller
    that could not reach a protected agent cannot tell an unknown one from it either."""
    key = request_key(agents, headers)
    try:
        agent = agents.get(name)
    except UnknownAgent:
        if agents.api_keys and (key is None or not key.all_agents):
            raise (_needs_key(name) if key is None else _forbidden(key, name)) from None
        raise
    if key is not None:
        if not agents.key_allows(key, agent):
            raise _forbidden(key, name)
    elif agent.require_key:
        raise _needs_key(name)
    return agent


def _forbidden(key: ApiKey, name: str) -> Forbidden:
    return Forbidden(f"the API key {key.name!r} is not allowed for agent {name!r}")


def check_global_access(agents: Agents, headers: Mapping[str, str]) -> None:
    """Endpoints spanning all agents need a key valid for every agent, once any key exists."""
    key = request_key(agents, headers)
    if key is None:
        if agents.api_keys:
            raise Unauthorized("this endpoint needs an API key valid for every agent")
        return
    if not key.all_agents:
        raise Forbidden(
            f"the API key {key.name!r} is not allowed for endpoints that span every agent"
        )


def check_any_key(agents: Agents, headers: Mapping[str, str]) -> None:
    """Endpoints that read and write no agent's memories (the embeddings) take any valid key,
    scoped or not, once keys exist."""
    if request_key(agents, headers) is None and agents.api_keys:
        raise Unauthorized("this endpoint needs an API key (Authorization: Bearer <key>)")

"""Optional API keys: which requests may reach which agent's endpoints."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from shared.agents import Agents, ApiKey
from shared.errors import Forbidden, Unauthorized


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key a request carries: `Authorization: Bearer <key>` or `X-API-Key: <key>`."""
    authorization = headers.get("authorization", "")
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return headers.get("x-api-key") or None


def _find(agents: Agents, key: str) -> ApiKey | None:
    # Compare every key in constant time, so timing does not reveal a near match.
    found = None
    for candidate in agents.api_keys:
        if hmac.compare_digest(candidate.key.encode(), key.encode()):
            found = candidate
    return found


def check_access(agents: Agents, agent: str | None, headers: Mapping[str, str]) -> None:
    """Allow or refuse a request for one agent's endpoints (`agent`), or for endpoints that
    span all agents (`agent` None: those need an unrestricted key once any key exists)."""
    key = presented_key(headers)
    if key is not None:
        found = _find(agents, key)
        if found is None:
            raise Unauthorized("the API key is not valid")
        if not found.allows(agent):
            target = f"agent {agent!r}" if agent else "endpoints that span every agent"
            raise Forbidden(f"the API key {found.name!r} is not allowed for {target}")
        return
    if agent is None:
        if agents.api_keys:
            raise Unauthorized("this endpoint needs an API key valid for every agent")
        return
    if agents.get(agent).require_key:
        raise Unauthorized(
            f"agent {agent!r} requires an API key (Authorization: Bearer <key> or X-API-Key)"
        )

"""Which agents a request may reach: the memory viewer's agent list, by api/auth.py's rules."""

from __future__ import annotations

from collections.abc import Mapping

from api.auth import request_key, resolve_agent
from api.health import seen_agents
from api.memory_schemas import AgentEntry, AgentList
from shared.agents import ApiKey
from shared.errors import MemoryPoolError
from shared.runtime import Runtime
from shared.state import keys


def _written_only_through_qdrant(runtime: Runtime, known: Mapping[str, str]) -> dict[str, str]:
    """Agents whose collection st-qdrant-memory made and filled through /qdrant, which records
    no name (only /save does): collection -> the name that reaches it."""
    found = {}
    for collection in runtime.store.collection_names():
        name = None if collection in known else runtime.agents.name_for_collection(collection)
        try:
            if name is not None and runtime.agents.collection_of(name) == collection:
                found[collection] = name
        except MemoryPoolError:
            continue  # a name no agent can have
    return found


def _scoped_to(runtime: Runtime, key: ApiKey | None) -> dict[str, str]:
    """The agents a scoped key names, by collection: unlisted ones that stored nothing yet are
    its agents too (`memory-pool mcp` takes a key's only agent from this list)."""
    found = {}
    for name in key.agents or () if key is not None else ():
        try:
            found[runtime.agents.collection_of(name)] = name
        except MemoryPoolError:
            continue  # a name no agent can have
    return found


def visible_agents(runtime: Runtime, headers: Mapping[str, str]) -> AgentList:
    """Listed agents, those seen storing messages and those the request's key is scoped to,
    each kept only if `resolve_agent` lets this request reach it, exactly as the agent's own
    endpoints would judge it."""
    agents = runtime.agents
    key = request_key(agents, headers)  # 401 for a key that is not valid, before anything else
    names = {agent.collection_name: agent.name for agent in agents.listed}
    for collection, name in (_scoped_to(runtime, key) | seen_agents(runtime)).items():
        names.setdefault(collection, name)
    names.update(_written_only_through_qdrant(runtime, names))
    entries = []
    for collection, name in sorted(names.items(), key=lambda item: item[1].casefold()):
        try:
            agent = resolve_agent(agents, name, headers)
        except MemoryPoolError:
            continue  # unknown, protected or out of this key's scope: not shown
        blocked = runtime.redis.get(keys.blocked(collection))
        entries.append(
            AgentEntry(
                name=agent.name,
                collection=collection,
                listed=agents.is_listed(agent),
                blocked=blocked.decode() if isinstance(blocked, bytes) else blocked,
            )
        )
    return AgentList(agents=entries, keys_configured=bool(agents.api_keys))

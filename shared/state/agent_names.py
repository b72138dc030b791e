"""Canonical agent names: a listed agent's `name`, else the first spelling that stored something."""

from __future__ import annotations

import redis.asyncio

from shared.agents import AgentConfig, Agents
from shared.state import keys


class AgentNames:
    """What chunk text calls an unlisted agent (its speaker when `self_speaker` is unset): every
    spelling reaching one collection is one agent, so all of them get the name recorded first.

    A recorded name never changes, so each process remembers it after one round trip.
    """

    def __init__(self, client: redis.asyncio.Redis, agents: Agents) -> None:
        self.redis = client
        self.agents = agents
        self._known: dict[str, str] = {}

    async def canonical(self, agent: AgentConfig) -> AgentConfig:
        if self.agents.is_listed(agent):
            return agent
        collection = agent.collection_name
        name = self._known.get(collection)
        if name is None:
            pipe = self.redis.pipeline(transaction=True)
            pipe.hsetnx(keys.NAMES, collection, agent.name)
            pipe.hget(keys.NAMES, collection)
            _, recorded = await pipe.execute()
            name = recorded.decode() if isinstance(recorded, bytes) else str(recorded)
            self._known[collection] = name
        return agent if name == agent.name else agent.model_copy(update={"name": name})

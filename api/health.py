"""The /health report: each dependency reachable or not, per-agent collection state, backlog."""

from __future__ import annotations

from typing import Any

import redis

from api.recall.lexical import hybrid_possible
from shared.agents import AgentDefaults
from shared.errors import MemoryPoolError
from shared.runtime import Runtime
from shared.state import keys
from shared.state.text import as_text
from shared.store import bm25_terms as bm25_store
from shared.store.interface import CollectionState

CELERY_QUEUE = "celery"


def _redis_section(runtime: Runtime) -> dict[str, Any]:
    client = runtime.redis
    try:
        client.ping()
        collections = seen_agents(runtime)
        return {
            "ok": True,
            "due_conversations": int(client.zcard(keys.DUE)),
            "queued_tasks": int(client.llen(CELERY_QUEUE)),
            "dead_letters": int(client.llen(keys.DEAD_LETTERS)),
            "quarantined": runtime.quarantine.count(),
            "buffered_messages": runtime.buffers.buffered_messages(
                [c for coll in collections for c in runtime.buffers.conversations_of(coll)]
            ),
            "agents_seen": sorted(collections.values()),
        }
    except redis.RedisError as exc:
        return {"ok": False, "error": str(exc)}


def seen_agents(runtime: Runtime) -> dict[str, str]:
    """Every agent that ever stored a message: collection -> its canonical name."""
    recorded = runtime.redis.hgetall(keys.NAMES)
    return {as_text(coll): as_text(name) for coll, name in recorded.items()}


def _embedding_section(runtime: Runtime) -> dict[str, Any]:
    settings = runtime.settings
    ok = runtime.embedder.ping()
    section: dict[str, Any] = {
        "ok": ok, "provider": settings.embedding_provider, "model": runtime.embedder.model,
    }  # fmt: skip
    if ok:
        section["dimensions"] = runtime.embedder.dimensions()
    return section


def _agent_section(
    runtime: Runtime, name: str, collection: str, dims: int | None, quarantined: int
) -> dict[str, Any]:
    state = runtime.store.collection(collection)
    blocked = runtime.redis.get(keys.blocked(collection))
    section: dict[str, Any] = {"collection": collection, "exists": state is not None}
    if state is not None:
        section.update(
            vector_size=state.size,
            points=state.points_count,
            model=state.model,
            model_matches=(state.model in (None, runtime.embedder.model))
            and (dims is None or state.size == dims),
            **lexical_state(runtime, name, state),
        )
    section["blocked"] = as_text(blocked) if blocked else None
    section["quarantined"] = quarantined
    return section | fusion_settings(runtime, name)


def fusion_settings(runtime: Runtime, name: str) -> dict[str, Any]:
    """How /retrieve fuses this agent's legs by default, whether its collection exists or not."""
    settings: AgentDefaults
    try:
        settings = runtime.agents.get(name)
    except MemoryPoolError:  # seen once, no longer accepted: the file's defaults
        settings = runtime.agents.defaults
    return {"fusion": settings.fusion, "lexical_weight": settings.lexical_weight}


def lexical_state(runtime: Runtime, name: str, state: CollectionState) -> dict[str, Any]:
    """Whether the collection has BM25 terms, how many points still lack them, and so how
    /retrieve recalls it by default."""
    try:
        configured = runtime.agents.get(name).recall
    except MemoryPoolError:
        configured = "hybrid"
    missing = bm25_store.lacking_terms(runtime.store, state.name) if state.has_bm25 else None
    return {
        "bm25": state.has_bm25,
        "points_without_bm25": state.points_count if missing is None else missing,
        "recall": configured if hybrid_possible(state, local=runtime.store.local) else "dense",
    }


def health_report(runtime: Runtime) -> dict[str, Any]:
    report: dict[str, Any] = {"redis": _redis_section(runtime)}
    report["qdrant"] = {
        "ok": runtime.store.ping(),
        "local": runtime.settings.qdrant_url is None,  # in this process, not a server
        "engine": runtime.store.kind,  # "embedded" (Qdrant Edge), "server" or "local" (tests)
    }
    report["embedding"] = _embedding_section(runtime)
    dims = report["embedding"].get("dimensions")
    agents: dict[str, Any] = {}
    if report["qdrant"]["ok"] and report["redis"]["ok"]:
        # One entry per collection: an agent is its collection, whatever its spellings.
        names = {agent.collection_name: agent.name for agent in runtime.agents.listed}
        for collection, name in seen_agents(runtime).items():
            names.setdefault(collection, name)
        quarantined = runtime.quarantine.counts_by_collection()
        agents = {
            name: _agent_section(runtime, name, collection, dims, quarantined.get(collection, 0))
            for collection, name in sorted(names.items(), key=lambda item: item[1])
        }
    report["agents"] = agents
    healthy = all(report[part]["ok"] for part in ("redis", "qdrant", "embedding"))
    blocked = any(section.get("blocked") for section in agents.values())
    # A quarantined conversation is memory not being written: an operator must look.
    held = bool(report["redis"].get("quarantined"))
    report["status"] = "ok" if healthy and not blocked and not held else "degraded"
    return report

"""The BM25 backfill: terms for points that have none (st-qdrant-memory's, and memory-pool's own
from before hybrid recall), computed from their payload `text` in the background.

Idempotent and resumable without a cursor: it only ever asks Qdrant for points still lacking
terms, and writes them with a conditional `update_vectors` that touches neither the dense vector
nor the payload, never creates a point (a deleted one stays deleted) and never overwrites terms
a flush wrote meanwhile. One backfill runs at a time per deployment (a Redis lock).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import redis

from shared import bm25_store
from shared.agents import AgentConfig, Agents
from shared.bm25 import documents_terms, encoding_of
from shared.errors import DimensionMismatch, MemoryPoolError, ModelMismatch
from shared.redis_lock import held
from shared.store import Store
from workers.collections import CollectionGuard

log = logging.getLogger(__name__)

LOCK_KEY = "mp:lock:backfill"
BATCH = 256
BUDGET_SECONDS = 5.0  # per task, so a backfill never holds a worker slot for long
# Between batches: local mode's lock is not fair, and a batch there holds it for a scan of the
# whole collection; the pause lets waiting flushes and recalls in (BENCHMARKS.md section 6).
PAUSE_SECONDS = 0.02


@dataclass
class BackfillReport:
    points: int = 0
    collections: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # re-made for a new language
    finished: bool = True  # False: the budget ran out with points left


def agents_to_backfill(agents: Agents, seen: Iterable[str]) -> list[AgentConfig]:
    """Listed agents and every agent that stored something, one per collection."""
    found = {agent.collection_name: agent for agent in agents.listed}
    for name in seen:
        try:
            agent = agents.get(name)
        except MemoryPoolError:
            continue  # no longer accepted: its collection is not ours to touch
        found.setdefault(agent.collection_name, agent)
    return list(found.values())


def backfill(
    agents: list[AgentConfig],
    *,
    store: Store,
    collections: CollectionGuard,
    client: redis.Redis,
    budget_seconds: float = BUDGET_SECONDS,
    batch: int = BATCH,
) -> BackfillReport:
    """Terms for up to `budget_seconds` of work; the next run goes on where this one stopped."""
    report = BackfillReport()
    with held(client, LOCK_KEY, ttl_ms=int((budget_seconds + 30) * 1000)) as mine:
        if not mine:
            return report
        deadline = time.monotonic() + budget_seconds
        for agent in agents:
            if report.points and time.monotonic() >= deadline:
                report.finished = False  # every run does at least one batch
                break
            if _prepare(agent, store, collections, report):
                report.finished &= _fill(agent, store, report, deadline=deadline, batch=batch)
    return report


def _prepare(
    agent: AgentConfig, store: Store, collections: CollectionGuard, report: BackfillReport
) -> bool:
    """The collection exists, has the BM25 vector (added in place if need be) and its terms
    are of the agent's language; False when there is nothing to backfill."""
    name = agent.collection_name
    state = store.collection(name)
    if state is None:
        return False
    if not state.has_bm25:
        try:
            collections.forget(name)  # ensure() again adds the vector on a server that can
            collections.ensure(name)
        except (DimensionMismatch, ModelMismatch):
            return False  # writes are held and /health says why
        state = store.collection(name)
        if state is None or not state.has_bm25:
            return False  # an older server: recall stays dense, /health says so
    encoding = encoding_of(agent.language)
    if state.bm25_encoding != encoding:
        if state.bm25_encoding is not None:
            # another language made these terms: they are made again, from every point's text
            log.info("BM25 terms of %s are re-made for %s", name, encoding)
            bm25_store.drop_terms(store, name)
            report.dropped.append(name)
        bm25_store.record_encoding(store, name, encoding)
    return True


def _fill(
    agent: AgentConfig, store: Store, report: BackfillReport, *, deadline: float, batch: int
) -> bool:
    """Pages of points lacking terms until none are left (True) or the deadline (False)."""
    name = agent.collection_name
    offset = None
    while True:
        page, offset = bm25_store.page_lacking_terms(store, name, limit=batch, offset=offset)
        if page:
            terms = documents_terms([text for _, text in page], agent.language)
            bm25_store.write_missing_terms(
                store, name, [(pid, t) for (pid, _), t in zip(page, terms, strict=True)]
            )
            report.points += len(page)
            if name not in report.collections:
                report.collections.append(name)
        if offset is None:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(PAUSE_SECONDS)

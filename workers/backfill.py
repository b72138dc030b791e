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

from shared.agents import AgentConfig, Agents
from shared.embedding.bm25 import documents_terms, encoding_of
from shared.errors import DimensionMismatch, MemoryPoolError, ModelMismatch
from shared.state import keys
from shared.state.lock import held
from shared.store import bm25_terms as bm25_store
from shared.store.interface import CollectionState, Store
from workers.collections import CollectionGuard

log = logging.getLogger(__name__)

LOCK_KEY = "mp:lock:backfill"
# Small steps: a step's page read and terms write hold the engine (Qdrant Edge's shard lock, in
# serve's process) while a recall may wait; between steps the store decides how long recalls
# go first (Store.give_way).
BATCH = 64
BUDGET_SECONDS = 5.0  # per task, so a backfill never holds a worker slot for long
# Between batches: local mode's lock is not fair, and a batch there holds it for a scan of the
# whole collection; the pause lets waiting flushes and recalls in (BENCHMARKS.md section 6).
PAUSE_SECONDS = 0.02
# A finished collection is scanned again when its point count changes (st-qdrant-memory wrote),
# and at least this often (a delete and a write that kept the count).
RESCAN_SECONDS = 600
REFUSED_SECONDS = 600


@dataclass
class BackfillReport:
    points: int = 0
    collections: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # re-made for a new language
    added: list[str] = field(default_factory=list)  # the BM25 vector added in place
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
            state = _prepare(agent, store, collections, client, report)
            if state is None:
                continue
            # a collection new to BM25 (made again?) or whose terms were dropped for a new
            # language may have the count of the last pass: never skipped
            fresh = state.name in report.dropped or state.name in report.added
            if not fresh and _done_at(client, state):
                continue
            finished = _fill(agent, store, report, deadline=deadline, batch=batch)
            report.finished &= finished
            if finished:  # the count before the pass: points written meanwhile are seen next time
                client.set(keys.backfilled(state.name), state.points_count, ex=RESCAN_SECONDS)
    return report


def _done_at(client: redis.Redis, state: CollectionState) -> bool:
    """Whether the last pass found nothing left at this very point count: a scan of the whole
    collection is skipped (in local mode it holds the lock for the whole scan)."""
    done = client.get(keys.backfilled(state.name))
    return done is not None and int(done) == state.points_count


def _prepare(
    agent: AgentConfig,
    store: Store,
    collections: CollectionGuard,
    client: redis.Redis,
    report: BackfillReport,
) -> CollectionState | None:
    """The collection exists, has the BM25 vector (added in place if need be) and its terms
    are of the agent's language; None when there is nothing to backfill."""
    name = agent.collection_name
    state = store.collection(name)
    if state is None:
        return None
    if not state.has_bm25:
        if client.exists(keys.bm25_refused(name)):
            return None  # refused a moment ago: asked again after REFUSED_SECONDS
        try:
            collections.forget(name)  # ensure() again adds the vector on a server that can
            collections.ensure(name)
        except (DimensionMismatch, ModelMismatch):
            return None  # writes are held and /health says why
        state = store.collection(name)
        if state is None or not state.has_bm25:
            # an older server: recall stays dense, /health says so; asked again later, in case
            # the server was upgraded
            client.set(keys.bm25_refused(name), 1, ex=REFUSED_SECONDS)
            return None
        report.added.append(name)
    encoding = encoding_of(agent.language)
    if state.bm25_encoding != encoding:
        if state.bm25_encoding is not None:
            # another language made these terms: they are made again, from every point's text
            log.info("BM25 terms of %s are re-made for %s", name, encoding)
            bm25_store.drop_terms(store, name)
            report.dropped.append(name)
        bm25_store.record_encoding(store, name, encoding)
    return state


def _fill(
    agent: AgentConfig, store: Store, report: BackfillReport, *, deadline: float, batch: int
) -> bool:
    """Pages of points lacking terms until none are left (True) or the deadline (False)."""
    name = agent.collection_name
    offset = None
    while True:
        step = time.monotonic()
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
        # within the budget (the lock's expiry allows for it): a backfill while recalls come
        # does less per task, the next task goes on
        store.give_way(time.monotonic() - step)
        if time.monotonic() >= deadline:
            return False
        time.sleep(PAUSE_SECONDS)

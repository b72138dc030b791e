"""Recall: embed the query (cached), query the agent's collection, filter, format the block."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from cachetools import TTLCache

from api.hybrid_recall import HybridFill, LexicalCollections
from shared import metrics
from shared.agents import AgentConfig
from shared.bm25 import DEFAULT_LEXICAL_THRESHOLD, Terms, query_terms
from shared.embedder import Embedder
from shared.errors import InputRejected, RecallTimeout
from shared.filters import Filter
from shared.format import RecallHit, recall_block
from shared.hybrid_store import Fusion, LexicalUnavailable
from shared.recall_query import RecallFilters, recall_filter
from shared.recall_rules import MAX_PAGES, MIN_PAGE, HitSelector
from shared.store import Store

log = logging.getLogger(__name__)


class RecallBusy(RecallTimeout):
    """Every query-embedding slot stayed taken for the whole wait: answer now, without memories."""

    code = "recall_busy"


class QueryCache:
    """Query embeddings by text: clients often ask the same text again within seconds.

    At most `concurrency` queries are embedded at once. A recall abandoned at its timeout
    still holds its slot until its embedding returns, so new queries wait at most `wait`
    seconds for a slot and then fail fast, instead of piling up behind slow work.
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        size: int = 2048,
        ttl: float = 600.0,
        concurrency: int = 4,
        wait: float = 1.0,
    ) -> None:
        self.embedder = embedder
        self._cache: TTLCache[str, list[float]] = TTLCache(maxsize=size, ttl=ttl)
        # the query's BM25 terms, by (language, text): in-process and cheap, cached beside it
        self._terms: TTLCache[tuple[str, str], Terms] = TTLCache(maxsize=size, ttl=ttl)
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(concurrency)
        self._concurrency = concurrency
        self._wait = wait

    def vector(self, text: str) -> list[float]:
        with self._lock:
            cached = self._cache.get(text)
        if cached is not None:
            metrics.QUERY_CACHE.labels("hit").inc()
            return cached
        metrics.QUERY_CACHE.labels("miss").inc()
        if not self._slots.acquire(timeout=self._wait):
            raise RecallBusy(
                f"{self._concurrency} query embeddings are already running; answer without "
                "memories (MEMORY_POOL_RECALL_CONCURRENCY)"
            )
        try:
            (vector,) = self.embedder.embed([text])
        finally:
            self._slots.release()
        if isinstance(vector, InputRejected):
            raise vector
        with self._lock:
            self._cache[text] = vector
        return vector

    def terms(self, text: str, language: str) -> Terms:
        key = (language, text)
        with self._lock:
            cached = self._terms.get(key)
        if cached is None:
            cached = query_terms(text, language)
            with self._lock:
                self._terms[key] = cached
        return cached


@dataclass(frozen=True, slots=True)
class RecallRequest:
    query_text: str
    excluded_ids: frozenset[str]
    limit: int
    score_threshold: float
    filters: RecallFilters
    mode: Literal["hybrid", "dense"] = "dense"
    fusion: Fusion = "dbsf"
    lexical_threshold: float = DEFAULT_LEXICAL_THRESHOLD


@dataclass(frozen=True, slots=True)
class Recall:
    hits: Sequence[RecallHit]
    formatted: str
    queries: int  # vector queries it took (1 in the common case)


def recall(
    agent: AgentConfig,
    request: RecallRequest,
    *,
    store: Store,
    cache: QueryCache,
    lexical: LexicalCollections | None = None,
) -> Recall:
    """The best `limit` eligible chunks, over-fetching until filled or the collection runs out:
    fused with BM25 where the request asks for hybrid and the collection has terms."""
    try:
        vector = cache.vector(request.query_text)
    except InputRejected as exc:
        # The provider refuses this text for good (content policy, length): nothing can match
        # it, which is "no memories", not a server fault (an undocumented 500 before).
        # Its reason may quote the query: only at DEBUG.
        log.warning("recall query refused by the embedding provider")
        log.debug("embedding provider's reason: %s", exc)
        return Recall([], "", 0)
    # A Qdrant server or Edge matches excluded ids on its keyword index; local mode would test
    # them against every point in Python (4-10x slower, bench/recall.py), so there the selector
    # alone drops excluded hits while over-fetching.
    server_side = frozenset() if store.local else request.excluded_ids
    query_filter = recall_filter(request.filters, server_side)
    selector = HitSelector(set(request.excluded_ids), request.limit)
    collection = agent.collection_name
    queries = 0
    if request.mode == "hybrid" and lexical is not None and lexical.has_bm25(collection):
        terms = cache.terms(request.query_text, agent.language)
        # a query of stopwords only has no lexical leg; a long one may be too costly for
        # local mode's sparse scoring on this collection
        if terms and lexical.has_bm25(collection, len(terms.indices)):
            fill = HybridFill(store, collection, vector, terms, request, query_filter)
            try:
                queries = fill.run(selector)
            except LexicalUnavailable as exc:
                log.warning("recalling dense: %s", exc)
                lexical.forget(collection)
    if not queries:
        queries = _dense_fill(selector, store, collection, vector, request, query_filter)
    return Recall(selector.kept, recall_block(selector.kept, agent.legacy_user_label), queries)


def _dense_fill(
    selector: HitSelector,
    store: Store,
    collection: str,
    vector: list[float],
    request: RecallRequest,
    query_filter: Filter | None,
) -> int:
    """Pages of nearest points by cosine until the selector is full; returns the queries."""
    page, offset, queries = max(MIN_PAGE, request.limit * 2), 0, 0
    while not selector.full and queries < MAX_PAGES:
        hits = store.query(
            collection,
            vector,
            limit=page,
            offset=offset,
            score_threshold=request.score_threshold,
            query_filter=query_filter,
        )
        queries += 1
        for hit in hits:
            selector.offer(hit)
        if len(hits) < page:
            break  # nothing more above the threshold
        offset += page
        page *= 2
    return queries

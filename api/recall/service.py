"""Recall: embed the query (cached), query the agent's collection, filter, format the block."""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from api.recall.hybrid import HybridFill
from api.recall.lexical import LexicalCollections
from api.recall.query_cache import QueryCache
from api.recall.query_filter import RecallFilters, recall_filter
from api.recall.request import Recall, RecallRequest
from api.recall.rules import MAX_PAGES, MIN_PAGE, HitSelector
from api.recall.time_words import TimeWindow, find_window
from shared.agents import AgentConfig
from shared.errors import InputRejected
from shared.format.recall_block import recall_block
from shared.store.filters import Filter
from shared.store.interface import LexicalUnavailable, Store

log = logging.getLogger(__name__)


def recall(
    agent: AgentConfig,
    request: RecallRequest,
    *,
    store: Store,
    cache: QueryCache,
    lexical: LexicalCollections | None = None,
) -> Recall:
    """The best `limit` eligible chunks, over-fetching until filled or the collection runs out:
    fused with BM25 where the request asks for hybrid and the collection has terms. Time words
    in the query put the chunks of their window first, then the rest fills the limit."""
    try:
        vector = cache.vector(request.query_text)
    except InputRejected as exc:
        # The provider refuses this text for good (content policy, length): nothing can match
        # it, which is "no memories", not a server fault (an undocumented 500 before).
        # Its reason may quote the query: only at DEBUG.
        log.warning("recall query refused by the embedding provider")
        log.debug("embedding provider's reason: %s", exc)
        return Recall([], "", 0)
    selector = HitSelector(set(request.excluded_ids), request.limit)
    fill = _Fill(agent, store, cache, lexical, vector)
    window = _window(request)
    queries = 0
    if window is not None:
        # the time words name a date, not a subject: their text leaves the BM25 terms
        request = replace(request, query_text=window.rest)
        inside = _within(request.filters, window)
        if inside is not None:
            queries += fill.run(selector, request, inside)
    queries += fill.run(selector, request, request.filters)
    return Recall(selector.kept, recall_block(selector.kept, agent.legacy_user_label), queries)


def _window(request: RecallRequest) -> TimeWindow | None:
    if not request.time_words:
        return None
    now = request.now if request.now is not None else int(time.time() * 1000)
    return find_window(request.query_text, now)


def _within(filters: RecallFilters, window: TimeWindow) -> RecallFilters | None:
    """The request's filters narrowed to the window; None when since/until leave nothing."""
    since = window.since if filters.since is None else max(filters.since, window.since)
    until = window.until if filters.until is None else min(filters.until, window.until)
    return replace(filters, since=since, until=until) if since <= until else None


class _Fill:
    """One leg of a recall: hybrid where asked and possible, else dense, under some filters."""

    def __init__(
        self,
        agent: AgentConfig,
        store: Store,
        cache: QueryCache,
        lexical: LexicalCollections | None,
        vector: list[float],
    ) -> None:
        self.agent, self.store, self.cache, self.lexical = agent, store, cache, lexical
        self.vector = vector

    def run(self, selector: HitSelector, request: RecallRequest, filters: RecallFilters) -> int:
        """Offers hits until the selector is full; returns the vector queries it took."""
        if selector.full:
            return 0
        # A Qdrant server or Edge matches excluded ids on its keyword index; local mode would
        # test them against every point in Python (4-10x slower, bench/recall.py), so there the
        # selector alone drops excluded hits while over-fetching.
        server_side = frozenset() if self.store.local else request.excluded_ids
        query_filter = recall_filter(filters, server_side)
        collection, lexical = self.agent.collection_name, self.lexical
        queries = 0
        if request.mode == "hybrid" and lexical is not None and lexical.has_bm25(collection):
            terms = self.cache.terms(request.query_text, self.agent.language)
            # a query of stopwords only has no lexical leg; a long one may be too costly for
            # local mode's sparse scoring on this collection
            if terms and lexical.has_bm25(collection, len(terms.indices)):
                fused = HybridFill(
                    self.store, collection, self.vector, terms, request, query_filter
                )
                try:
                    queries = fused.run(selector)
                except LexicalUnavailable as exc:
                    log.warning("recalling dense: %s", exc)
                    lexical.forget(collection)
        if not queries:
            queries = _dense_fill(
                selector, self.store, collection, self.vector, request, query_filter
            )
        return queries


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

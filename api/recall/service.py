"""Recall: embed the query (cached), query the agent's collection, filter, format the block."""

from __future__ import annotations

import logging

from api.recall.hybrid import HybridFill
from api.recall.lexical import LexicalCollections
from api.recall.query_cache import QueryCache
from api.recall.query_filter import recall_filter
from api.recall.request import Recall, RecallRequest
from api.recall.rules import MAX_PAGES, MIN_PAGE, HitSelector
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

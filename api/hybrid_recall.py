"""Hybrid recall: the dense and BM25 legs fused in Qdrant, rescored to the dense cosine in one
more request, then today's rules (exclusions, text dedupe, fill until the limit)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cachetools import TTLCache

from shared.bm25 import Terms
from shared.filters import Filter
from shared.format import RecallHit
from shared.hybrid_store import FusedPoint, cosines, local_mode_fits
from shared.recall_rules import MAX_PAGES, MIN_PAGE, HitSelector, is_excluded
from shared.store import FusedQuery, Store

if TYPE_CHECKING:
    from api.recall import RecallRequest

# How long a process trusts what it read about a collection's BM25 vector: the workers add it
# (and the backfill fills it) without telling the API.
LEXICAL_STATE_SECONDS = 30.0


class LexicalCollections:
    """Whether a collection can be recalled hybrid (it has the BM25 vector; in local mode, it
    is not too large for the query), read from Qdrant at most every 30 s."""

    def __init__(self, store: Store, *, ttl: float = LEXICAL_STATE_SECONDS) -> None:
        self.store = store
        # the collection's points where it has the BM25 vector, None where it has not
        self._known: TTLCache[str, int | None] = TTLCache(
            maxsize=4096, ttl=ttl, timer=time.monotonic
        )
        self._lock = threading.Lock()

    def has_bm25(self, collection: str, terms: int = 0) -> bool:
        """For a query of `terms` BM25 terms (local mode's sparse scoring grows with them)."""
        with self._lock:
            found = collection in self._known
            points = self._known.get(collection)
        if not found:
            state = self.store.collection(collection)
            points = state.points_count if state is not None and state.has_bm25 else None
            with self._lock:
                self._known[collection] = points
        if points is None:
            return False
        return not self.store.local or local_mode_fits(points, terms)

    def forget(self, collection: str) -> None:
        with self._lock:
            self._known.pop(collection, None)


@dataclass
class HybridFill:
    """Fused pages with growing prefetch limits (an offset cannot reach past the prefetches)
    until the selector is full, the collection runs out, or MAX_PAGES."""

    store: Store
    collection: str
    vector: list[float]
    terms: Terms
    request: RecallRequest
    query_filter: Filter | None

    def run(self, selector: HitSelector) -> int:
        """Offers qualifying hits in fused order; returns the Qdrant requests it took."""
        prefetch = max(MIN_PAGE, self.request.limit * 2)
        seen: set[str] = set()
        requests = 0
        while not selector.full and requests < 2 * MAX_PAGES:
            fused = self.store.fused_query(self.collection, FusedQuery(
                self.vector, self.terms, prefetch, self.request.score_threshold,
                self.query_filter, self.request.lexical_threshold, self.request.fusion,
            ))  # fmt: skip
            new = [p for p in fused if p.id not in seen]
            seen.update(p.id for p in fused)
            requests += 1 + self._offer(selector, new)
            if len(fused) < prefetch:
                break  # both legs ran out: a full leg alone gives `prefetch` points
            prefetch *= 2
        return requests

    def _offer(self, selector: HitSelector, points: list[FusedPoint]) -> int:
        excluded = selector.excluded
        candidates = [p for p in points if not is_excluded(p.payload, excluded)]
        if not candidates or selector.full:
            return 0
        # Every fused point qualifies: a leg admitted it, the dense one at the cosine
        # threshold, the lexical one at the BM25 threshold (the lexical-only rule).
        scores = cosines(self.store, self.collection, [p.id for p in candidates], self.vector)
        for point in candidates:
            cosine = scores.get(point.id)
            if cosine is not None:  # None: deleted between the two requests
                selector.offer(_hit(point, cosine))
        return 1


def _hit(point: FusedPoint, cosine: float) -> RecallHit:
    return RecallHit(point.id, cosine, point.payload, fused_score=point.fused_score)

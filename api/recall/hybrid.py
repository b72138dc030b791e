"""Hybrid recall: the dense and BM25 legs fused (in Qdrant, or here when the lexical leg is
weighted), rescored to the dense cosine in one more request where a point's cosine is not known
yet, then today's rules (exclusions, text dedupe, fill until the limit)."""

from __future__ import annotations

from dataclasses import dataclass

from api.recall.lexical import cosines
from api.recall.request import RecallRequest
from api.recall.rules import MAX_PAGES, MIN_PAGE, HitSelector, is_excluded
from shared.embedding.bm25 import Terms
from shared.format.recall_block import RecallHit
from shared.store.filters import Filter
from shared.store.interface import FusedPoint, FusedQuery, Store


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
                self.request.lexical_weight,
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
        # threshold, the lexical one at the BM25 threshold (the lexical-only rule). Legs fused
        # here already carry the cosine of what the dense leg found: only the rest is read.
        unknown = [p.id for p in candidates if p.cosine is None]
        scores = cosines(self.store, self.collection, unknown, self.vector)
        for point in candidates:
            cosine = scores.get(point.id) if point.cosine is None else point.cosine
            if cosine is not None:  # None: deleted between the two requests
                selector.offer(_hit(point, cosine))
        return 1 if unknown else 0


def _hit(point: FusedPoint, cosine: float) -> RecallHit:
    return RecallHit(point.id, cosine, point.payload, fused_score=point.fused_score)

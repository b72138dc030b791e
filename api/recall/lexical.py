"""Whether a collection can be recalled hybrid (it has BM25 terms; local mode's brute-force
sparse scoring stays within budget), and the dense rescore of fused hits."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from cachetools import TTLCache

from shared.store.interface import CollectionState, Store

# qdrant-client's local mode scores sparse vectors in pure Python, about 36 us per point
# (BENCHMARKS.md section 6): above this many points a local-mode collection is recalled dense,
# so hybrid recall never pushes past its 3 s budget. A server or Qdrant Edge has no limit.
LOCAL_MODE_MAX_POINTS = 20_000
# The cost grows with the query's terms too (at 20,000 points: 1.1 s for 5 terms, 1.5 s for
# 16, 4.3 s for 400, 13 s for 1,000, under the store's one lock), so the budget is points x
# terms: up to 16 terms the point limit above, a long message only on a smaller collection.
LOCAL_MODE_BASE_TERMS = 16
LOCAL_MODE_MAX_WORK = LOCAL_MODE_MAX_POINTS * LOCAL_MODE_BASE_TERMS


def hybrid_possible(state: CollectionState | None, *, local: bool) -> bool:
    """Whether a collection can be recalled hybrid: it has BM25 terms, and is small enough
    for local mode's brute-force sparse scoring (of a question of up to 16 terms)."""
    if state is None or not state.has_bm25:
        return False
    return not local or local_mode_fits(state.points_count, 0)


def local_mode_fits(points: int, terms: int) -> bool:
    """Whether local mode scores a query of `terms` BM25 terms over `points` within budget."""
    return points * max(terms, LOCAL_MODE_BASE_TERMS) <= LOCAL_MODE_MAX_WORK


def cosines(
    store: Store, name: str, ids: Sequence[str], dense: Sequence[float]
) -> dict[str, float]:
    """The dense cosine of the given points, in one request (a filter by id, so it is the
    same cost on any engine); BM25 scores are not read again: Qdrant's IDF makes a sparse
    query scan every point in local mode."""
    return store.cosines(name, ids, dense) if ids else {}


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

"""Hybrid recall's two store requests: the fused query (dense and BM25 prefetches under one
filter, fused by DBSF or RRF in the engine) and one rescore of the fused hits' dense cosine,
which a fused query does not return."""

from __future__ import annotations

from collections.abc import Sequence

from shared.store import CollectionState, FusedPoint, Fusion, LexicalUnavailable, Store

__all__ = ["FusedPoint", "Fusion", "LexicalUnavailable", "cosines"]

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

"""Between the interface's types and Qdrant Edge's: vectors, offsets, facet values, payload
index kinds, a fused query's legs and fusion, what a missing collection reads as, and which
errors refuse a write's content."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import qdrant_edge as edge

from shared.embedding.bm25 import VECTOR_NAME, Terms
from shared.store import interface as store
from shared.store.edge.filters import to_edge
from shared.store.edge.tuning import RESCORED
from shared.store.fusion import RRF_K

SCHEMAS = {"keyword": edge.PayloadSchemaType.Keyword, "integer": edge.PayloadSchemaType.Integer}
# What a missing collection reads as (never mutated)
NO_HITS: list[edge.ScoredPoint] = []
NO_RECORDS: list[edge.Record] = []
NO_PAGE: tuple[list[edge.Record], Any] = ([], None)
# Edge's errors for the content of a write (its OperationError texts, as a server answers them
# with 400 "Wrong input: ..."): the same write is refused again.
EDGE_REFUSALS = (
    "Wrong input",
    "Vector dimension error",
    "Not existing vector name",
    "Payload type does not match",
    "Validation",
)


def point_vectors(dense: Sequence[float], terms: Terms | None) -> Any:
    if terms is None:
        return list(dense)
    sparse = edge.SparseVector(list(terms.indices), list(terms.values))
    return {"": list(dense), VECTOR_NAME: sparse}


def stored_point_vectors(point: store.StoredPoint) -> Any:
    vectors: dict[str, Any] = {}
    if point.vector is not None:
        vectors[""] = list(point.vector)
    if point.sparse is not None:
        indices, values = point.sparse
        vectors[VECTOR_NAME] = edge.SparseVector(list(indices), list(values))
    return vectors


def offset_of(raw: Any) -> store.Offset:
    return raw if isinstance(raw, int) else str(raw)


def facet_value(value: Any) -> str:
    return str(value)


def legs_of(query: store.FusedQuery) -> list[dict[str, Any]]:
    """The dense and the lexical leg of a fused query, as a Prefetch's or a QueryRequest's
    arguments (the same in both, so the legs fused here are the ones Edge would fuse)."""
    flt = to_edge(query.query_filter)
    sparse = edge.SparseVector(list(query.terms.indices), list(query.terms.values))
    return [
        {"limit": query.prefetch, "query": edge.Query.Nearest(list(query.dense)), "filter": flt,
         "score_threshold": query.score_threshold, "params": RESCORED},
        {"limit": query.prefetch, "query": edge.Query.Nearest(sparse, using=VECTOR_NAME),
         "filter": flt, "score_threshold": query.lexical_threshold},
    ]  # fmt: skip


def fusion_of(query: store.FusedQuery) -> Any:
    """Edge's fusion for the query: DBSF, or RRF weighted [dense 1, lexical w]."""
    if query.fusion == "dbsf":
        return edge.Fusion.Dbsf()
    if query.lexical_weight == 1.0:
        return edge.Fusion.Rrf(k=RRF_K)
    return edge.Fusion.Rrf(k=RRF_K, weights=[1.0, query.lexical_weight])

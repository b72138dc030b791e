"""Hybrid recall's two Qdrant requests: the fused query (dense and BM25 prefetches under one
filter, fused by DBSF or RRF in Qdrant) and one batched rescore of the fused hits' cosine and
BM25 scores, which a fused query does not return."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from qdrant_client import QdrantClient, models

from shared.bm25 import VECTOR_NAME, Terms
from shared.store import Store
from shared.store_rules import sparse_vector

Fusion = Literal["dbsf", "rrf"]
FUSIONS: dict[str, models.Fusion] = {"dbsf": models.Fusion.DBSF, "rrf": models.Fusion.RRF}


@dataclass(frozen=True, slots=True)
class FusedPoint:
    id: str
    fused_score: float
    payload: dict


@dataclass(frozen=True, slots=True)
class LegScores:
    """A point's score in each leg: its cosine, and its BM25 score (0: no term in common)."""

    cosine: float
    bm25: float


def fused_query(
    store: Store,
    name: str,
    dense: Sequence[float],
    terms: Terms,
    *,
    prefetch: int,
    score_threshold: float | None,
    query_filter: models.Filter | None,
    lexical_threshold: float,
    fusion: Fusion,
) -> list[FusedPoint]:
    """Both legs' best `prefetch` points under the same filter, fused; each leg admits only
    points at its threshold (the cosine one, the BM25 one), so a weak lexical match never
    pushes a good dense one out."""
    legs = [
        models.Prefetch(
            query=list(dense), filter=query_filter, limit=prefetch, score_threshold=score_threshold
        ),
        models.Prefetch(
            query=sparse_vector(terms),
            using=VECTOR_NAME,
            filter=query_filter,
            limit=prefetch,
            score_threshold=lexical_threshold,
        ),
    ]
    response = store.read(
        name,
        lambda client: client.query_points(
            name,
            prefetch=legs,
            query=models.FusionQuery(fusion=FUSIONS[fusion]),
            limit=2 * prefetch,
            with_payload=True,
            with_vectors=False,
        ),
        missing=None,
    )
    if response is None:
        return []
    return [FusedPoint(str(p.id), p.score, dict(p.payload or {})) for p in response.points]


def rescore(
    store: Store, name: str, ids: Sequence[str], dense: Sequence[float], terms: Terms
) -> dict[str, LegScores]:
    """Cosine and BM25 scores of the given points, in one batched request."""
    if not ids:
        return {}
    only = models.Filter(must=[models.HasIdCondition(has_id=list(ids))])
    requests = [
        models.QueryRequest(query=list(dense), filter=only, limit=len(ids)),
        models.QueryRequest(
            query=sparse_vector(terms), using=VECTOR_NAME, filter=only, limit=len(ids)
        ),
    ]

    def run(client: QdrantClient) -> list[models.QueryResponse]:
        return client.query_batch_points(name, requests)

    answers = store.read(name, run, missing=[])
    if not answers:
        return {}
    cosine = {str(p.id): p.score for p in answers[0].points}
    bm25 = {str(p.id): p.score for p in answers[1].points}
    return {pid: LegScores(cosine[pid], bm25.get(pid, 0.0)) for pid in cosine}

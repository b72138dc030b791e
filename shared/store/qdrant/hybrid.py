"""Hybrid recall on qdrant-client: both legs fused by Qdrant (DBSF, or RRF weighted by the
lexical weight), both legs' scored points in one batch request (for memory-pool's weighted
DBSF), and the dense cosine of given points."""

from __future__ import annotations

from collections.abc import Sequence

from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import UnexpectedResponse

from shared.embedding.bm25 import VECTOR_NAME
from shared.store import interface as store
from shared.store.filters import Filter, HasIds
from shared.store.fusion import LegPoint
from shared.store.qdrant.connection import Connection
from shared.store.qdrant.filters import to_qdrant
from shared.store.qdrant.rules import sparse_vector

FUSIONS: dict[str, models.Fusion] = {"dbsf": models.Fusion.DBSF, "rrf": models.Fusion.RRF}


def fusion_of(query: store.FusedQuery) -> models.FusionQuery | models.RrfQuery:
    """Qdrant's fusion for the query: at weight 1 the plain one (any server since 1.10),
    else RRF weighted [dense 1, lexical w] (Qdrant's RRF weights; DBSF has none)."""
    if query.lexical_weight == 1.0 or query.fusion != "rrf":
        return models.FusionQuery(fusion=FUSIONS[query.fusion])
    return models.RrfQuery(rrf=models.Rrf(weights=[1.0, query.lexical_weight]))


class HybridQueries:
    """The part of QdrantStore that recalls hybrid (a mixin over the store's connection)."""

    connection: Connection

    def fused_in_store(self, name: str, query: store.FusedQuery) -> list[store.FusedPoint]:
        flt = to_qdrant(query.query_filter)
        legs = [
            models.Prefetch(
                query=list(query.dense),
                filter=flt,
                limit=query.prefetch,
                score_threshold=query.score_threshold,
            ),
            models.Prefetch(
                query=sparse_vector(query.terms),
                using=VECTOR_NAME,
                filter=flt,
                limit=query.prefetch,
                score_threshold=query.lexical_threshold,
            ),
        ]
        try:
            response = self.connection.read(
                name,
                lambda client: client.query_points(
                    name,
                    prefetch=legs,
                    query=fusion_of(query),
                    limit=2 * query.prefetch,
                    with_payload=True,
                    with_vectors=False,
                ),
                missing=None,
            )
        except (UnexpectedResponse, ValueError) as exc:
            raise store.LexicalUnavailable(f"{name} refused a fused query: {exc}") from exc
        if response is None:
            return []
        return [
            store.FusedPoint(str(p.id), p.score, dict(p.payload or {})) for p in response.points
        ]

    def fusion_legs(
        self, name: str, query: store.FusedQuery
    ) -> tuple[list[LegPoint], list[LegPoint]]:
        """Both legs as fused_in_store prefetches them, in one batch request."""
        flt = to_qdrant(query.query_filter)
        legs = [
            models.QueryRequest(
                query=list(query.dense), filter=flt, limit=query.prefetch,
                score_threshold=query.score_threshold, with_payload=True,
            ),
            models.QueryRequest(
                query=sparse_vector(query.terms), using=VECTOR_NAME, filter=flt,
                limit=query.prefetch, score_threshold=query.lexical_threshold, with_payload=True,
            ),
        ]  # fmt: skip
        try:
            answers = self.connection.read(
                name, lambda client: client.query_batch_points(name, legs), missing=None
            )
        except (UnexpectedResponse, ValueError) as exc:
            raise store.LexicalUnavailable(f"{name} refused a fused query: {exc}") from exc
        if answers is None:
            return [], []
        dense, lexical = (
            [LegPoint(str(p.id), p.score, dict(p.payload or {})) for p in answer.points]
            for answer in answers
        )
        return dense, lexical

    def cosines(self, name: str, ids: Sequence[str], dense: Sequence[float]) -> dict[str, float]:
        if not ids:
            return {}
        only = to_qdrant(Filter(must=(HasIds(tuple(ids)),)))

        def run(client: QdrantClient) -> models.QueryResponse:
            return client.query_points(
                name, query=list(dense), query_filter=only, limit=len(ids), with_payload=False
            )

        answer = self.connection.read(name, run, missing=None)
        return {} if answer is None else {str(p.id): p.score for p in answer.points}

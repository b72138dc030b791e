"""What the store decides without I/O: a collection's state from Qdrant's answer, whether it
suits our model, the vectors of a point, and how Qdrant's errors read."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from qdrant_client import models
from qdrant_client.http.exceptions import UnexpectedResponse

from shared.embedding.bm25 import VECTOR_NAME, Terms

if TYPE_CHECKING:
    from shared.store.interface import CollectionState, PointToWrite

# Key of our entry in the collection metadata; other tools may keep their own keys beside it.
METADATA_KEY = "memory_pool"
# How the collection's BM25 terms were made (shared.embedding.bm25.encoding_of); its own key,
# because Qdrant merges metadata updates key by key and the model entry is written separately.
BM25_METADATA_KEY = "memory_pool_bm25"
BM25_CONFIG = {VECTOR_NAME: models.SparseVectorParams(modifier=models.Modifier.IDF)}


def sparse_vector(terms: Terms) -> models.SparseVector:
    return models.SparseVector(indices=list(terms.indices), values=list(terms.values))


def point_vectors(point: PointToWrite, *, sparse: bool) -> Any:
    if not sparse or point.terms is None:
        return list(point.vector)
    # "" is the unnamed vector st-qdrant-memory reads and writes
    return {"": list(point.vector), VECTOR_NAME: sparse_vector(point.terms)}


def model_metadata(model: str, size: int) -> dict[str, Any]:
    return {METADATA_KEY: {"embedding_model": model, "dimensions": size}}


def collection_state(name: str, info: models.CollectionInfo) -> CollectionState:
    vectors = info.config.params.vectors
    single = vectors if isinstance(vectors, models.VectorParams) else None
    metadata = info.config.metadata or {}
    ours = metadata.get(METADATA_KEY)
    model = ours.get("embedding_model") if isinstance(ours, dict) else None
    bm25 = metadata.get(BM25_METADATA_KEY)
    encoding = bm25.get("encoding") if isinstance(bm25, dict) else None
    from shared.store.interface import CollectionState

    return CollectionState(
        name=name,
        size=single.size if single is not None else None,
        points_count=info.points_count or 0,
        model=model if isinstance(model, str) else None,
        vector_names=tuple(vectors) if isinstance(vectors, dict) else (),
        indexed_fields=frozenset(info.payload_schema or {}),
        sparse_names=tuple(info.config.params.sparse_vectors or {}),
        bm25_encoding=encoding if isinstance(encoding, str) else None,
    )


def is_missing(error: Exception, name: str) -> bool:
    # the server answers 404; local mode raises ValueError("Collection <name> not found")
    if isinstance(error, UnexpectedResponse):
        return error.status_code == 404
    return f"Collection {name} not found" in str(error)


def is_conflict(error: Exception) -> bool:
    # the server answers 409 (older ones 400 "already exists"); local mode raises ValueError
    if isinstance(error, UnexpectedResponse):
        return error.status_code == 409 or (
            error.status_code == 400 and b"already exists" in error.content
        )
    return "already exists" in str(error)


def is_rejected_input(error: UnexpectedResponse) -> bool:
    return error.status_code in (400, 422)

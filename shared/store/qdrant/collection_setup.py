"""Making and adopting a collection on a Qdrant server of any version: created with what the
server takes, our model recorded, the payload indexes and the BM25 vector added where missing."""

from __future__ import annotations

import logging
from typing import Any

from qdrant_client import models
from qdrant_client.http.exceptions import UnexpectedResponse

from shared.embedding.bm25 import VECTOR_NAME
from shared.errors import UpstreamUnavailable
from shared.store import interface as store
from shared.store.qdrant.connection import Connection
from shared.store.qdrant.rules import (
    BM25_CONFIG,
    is_conflict,
    is_rejected_input,
    model_metadata,
)
from shared.store.rules import check_compatible

log = logging.getLogger(__name__)

SCHEMAS = {"keyword": models.PayloadSchemaType.KEYWORD, "integer": models.PayloadSchemaType.INTEGER}


class CollectionSetup:
    """The part of QdrantStore that sets collections up (a mixin: it reads `collection` and
    learns the BM25 state through the store's own methods)."""

    connection: Connection
    _local: bool

    def collection(self, name: str) -> store.CollectionState | None:
        raise NotImplementedError

    def _learn_bm25(self, name: str, has: bool) -> None:
        raise NotImplementedError

    def ensure_collection(self, name: str, *, size: int, model: str) -> store.CollectionState:
        """Creates the collection, or checks an existing one and records our model on it; then
        adds the BM25 sparse vector where it is missing (a server that refuses: dense only)."""
        state = self.collection(name) or self._create(name, size=size, model=model)
        check_compatible(state, size=size, model=model)
        if state.model is None:
            state = self._record_model(name, size=size, model=model)
        self._ensure_indexes(state)
        if not state.has_bm25:
            state = self._add_bm25(state)
        self._learn_bm25(name, state.has_bm25)
        return state

    def _create(self, name: str, *, size: int, model: str) -> store.CollectionState:
        vectors = models.VectorParams(size=size, distance=models.Distance.COSINE)
        try:
            self._create_collection(name, vectors, model_metadata(model, size))
        except (UnexpectedResponse, ValueError) as e:
            if not is_conflict(e):
                raise
            # another worker created it first; it is judged like any existing collection
            log.info("Qdrant collection %s was created concurrently", name)
        return self._require(name)

    def _create_collection(
        self, name: str, vectors: models.VectorParams, metadata: dict[str, Any]
    ) -> None:
        # servers before 1.16 know no collection metadata, before 1.10 no IDF modifier: each
        # refusal drops what it refused (the model goes unrecorded, recall stays dense)
        attempts: list[dict[str, Any]] = [
            {"sparse_vectors_config": BM25_CONFIG, "metadata": metadata},
            {"sparse_vectors_config": BM25_CONFIG},
            {"metadata": metadata},
            {},
        ]
        for attempt, extra in enumerate(attempts):
            try:
                with self.connection.io() as client:
                    client.create_collection(name, vectors_config=vectors, **extra)
                return
            except UnexpectedResponse as e:
                if is_conflict(e) or not is_rejected_input(e) or attempt == len(attempts) - 1:
                    raise
                log.warning(
                    "Qdrant refused %s, creating %s without it: %s", "+".join(extra), name, e
                )

    def _add_bm25(self, state: store.CollectionState) -> store.CollectionState:
        """The BM25 vector added in place (Qdrant 1.18+); st-qdrant-memory never sees it."""
        config = models.SparseVectorNameConfig(
            sparse=models.SparseVectorConfig(modifier=models.Modifier.IDF)
        )
        try:
            with self.connection.io() as client:
                client.create_vector_name(state.name, VECTOR_NAME, config, wait=True)
        except UnexpectedResponse as e:
            if e.status_code not in (400, 404, 405, 422):
                raise
            # an older server has no such endpoint: this collection's recall stays dense
            log.warning(
                "Qdrant cannot add a BM25 vector to %s (older than 1.18?): %s", state.name, e
            )
            return state
        return self._require(state.name)

    def _record_model(self, name: str, *, size: int, model: str) -> store.CollectionState:
        try:
            with self.connection.io() as client:
                client.update_collection(name, metadata=model_metadata(model, size))
        except UnexpectedResponse as e:
            if not is_rejected_input(e):
                raise
            log.warning("Qdrant refused collection metadata, model of %s unrecorded: %s", name, e)
        state = self._require(name)
        if state.model is None:
            log.warning("Qdrant kept no collection metadata; model of %s unrecorded", name)
        # a worker configured with another model may have recorded its own at the same moment
        check_compatible(state, size=size, model=model)
        return state

    def _ensure_indexes(self, state: store.CollectionState) -> None:
        if self._local:
            return  # local mode ignores payload indexes and warns about each one
        for field_name, schema in store.PAYLOAD_INDEXES.items():
            if field_name not in state.indexed_fields:
                with self.connection.io() as client:
                    client.create_payload_index(state.name, field_name, SCHEMAS[schema], wait=True)

    def _require(self, name: str) -> store.CollectionState:
        state = self.collection(name)
        if state is None:
            # deleted between two of our calls: someone else is managing it, try again later
            raise UpstreamUnavailable(f"Qdrant collection {name} disappeared while being set up")
        return state

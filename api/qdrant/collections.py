"""Collections through /qdrant: described as Qdrant describes them, created through memory-pool's
own collection setup, and "deleted" as far as st-qdrant-memory's own points go."""

from __future__ import annotations

import logging
from typing import Any

from api.qdrant.access import Target
from api.qdrant.shape import QdrantRefusal, collection_missing
from shared.format.fields import SOURCE
from shared.runtime import Runtime
from shared.store.filters import Filter, IsEmpty
from shared.store.interface import PAYLOAD_INDEXES, CollectionState

log = logging.getLogger(__name__)

# st-qdrant-memory's points: every other writer of memory-pool's names itself in `source`.
WITHOUT_SOURCE = Filter(must=(IsEmpty(SOURCE),))
DELETE_BATCH = 256


def describe(state: CollectionState) -> dict[str, Any]:
    """GET /collections/{c}'s result: what st-qdrant-memory reads is
    `config.params.vectors.size`."""
    vectors = {} if state.size is None else {"size": state.size, "distance": "Cosine"}
    sparse = {name: {"modifier": "idf"} for name in state.sparse_names}
    schema = {
        name: {"data_type": PAYLOAD_INDEXES[name]}
        for name in sorted(state.indexed_fields)
        if name in PAYLOAD_INDEXES
    }
    return {
        "status": "green",
        "optimizer_status": "ok",
        "points_count": state.points_count,
        "config": {"params": {"vectors": vectors, "sparse_vectors": sparse}},
        "payload_schema": schema,
    }


def info(runtime: Runtime, target: Target) -> dict[str, Any]:
    state = runtime.store.collection(target.collection)
    if state is None:
        raise collection_missing(target.collection)
    return describe(state)


def create(runtime: Runtime, target: Target, *, size: int, distance: str) -> bool:
    """The agent's collection, set up as every flush sets it up (memory-pool's model recorded,
    payload indexes, the BM25 vector), only for vectors memory-pool's recall can search."""
    if distance != "Cosine":
        raise QdrantRefusal(
            400, f"Wrong input: memory-pool's collections use Cosine distance, not {distance!r}"
        )
    embedder = runtime.embedder
    dims = embedder.dimensions()
    if size != dims:
        raise QdrantRefusal(
            400,
            f"Wrong input: memory-pool embeds with {embedder.model} ({dims} dimensions); a "
            f"collection of {size} dimensions would hold vectors its recall cannot compare. "
            "Use the same embedding model in both (memory-pool's POST /v1/embeddings).",
        )
    if runtime.store.collection(target.collection) is not None:
        raise QdrantRefusal(409, f"Wrong input: Collection `{target.collection}` already exists!")
    runtime.store.ensure_collection(target.collection, size=dims, model=embedder.model)
    log.info("created collection %s for st-qdrant-memory (%d dimensions)", target.collection, dims)
    return True


def delete_own_points(runtime: Runtime, target: Target) -> bool:
    """SillyTavern's "Delete All Memories": st-qdrant-memory's own points (those without a
    `source`) go; what every other interface wrote, and the collection, stay. False, as Qdrant
    answers, when there is no collection."""
    store = runtime.store
    if store.collection(target.collection) is None:
        return False
    deleted = 0
    while True:
        page, _ = store.page(
            target.collection, query_filter=WITHOUT_SOURCE, limit=DELETE_BATCH, fields=()
        )
        if not page:
            break
        gone = store.delete_points(target.collection, [pid for pid, _ in page])
        if not gone:  # nothing left to delete that a page shows: never loop on it
            break
        deleted += gone
    log.info("deleted st-qdrant-memory's %d points of %s", deleted, target.collection)
    return True

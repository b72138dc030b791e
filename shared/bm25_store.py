"""The BM25 side of a collection in Qdrant: which points lack terms, writing terms to points
that still lack them (never creating or touching anything else), and the recorded encoding."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import UnexpectedResponse

from shared.bm25 import VECTOR_NAME, Terms
from shared.store import Store
from shared.store_rules import BM25_METADATA_KEY, sparse_vector

log = logging.getLogger(__name__)

Offset = models.ExtendedPointId | None
# Points whose BM25 vector is missing: st-qdrant-memory's, and memory-pool's from before.
LACKING = models.Filter(must_not=[models.HasVectorCondition(has_vector=VECTOR_NAME)])


def lacking_terms(store: Store, name: str) -> int:
    """How many points of the collection have no BM25 terms yet (0 for no collection)."""
    return store.count(name, LACKING)


def page_lacking_terms(
    store: Store, name: str, *, limit: int, offset: Offset = None
) -> tuple[list[tuple[str, str]], Offset]:
    """(point id, payload text) of up to `limit` points without terms, and the next offset."""
    page, following = store.read(
        name,
        lambda client: client.scroll(
            name,
            scroll_filter=LACKING,
            limit=limit,
            offset=offset,
            with_payload=["text"],
            with_vectors=False,
        ),
        missing=([], None),
    )
    found = [(str(p.id), str((p.payload or {}).get("text", ""))) for p in page]
    return found, following


def write_missing_terms(store: Store, name: str, terms: Sequence[tuple[str, Terms]]) -> None:
    """Adds terms to the points that still have none. Conditional on "no BM25 yet", so a flush
    that rewrote a point meanwhile (with terms of its new text) wins; `update_vectors` never
    creates a point, so one deleted meanwhile stays deleted (Qdrant answers 404 for it after
    writing the others)."""
    points = [
        models.PointVectors(id=pid, vector={VECTOR_NAME: sparse_vector(t)}) for pid, t in terms
    ]
    if not points:
        return

    def run(client: QdrantClient) -> None:
        try:
            client.update_vectors(name, points, update_filter=LACKING, wait=True)
        except KeyError as exc:  # local mode's "no such point"
            log.debug("backfill of %s: point %s was deleted meanwhile", name, exc)
        except UnexpectedResponse as exc:
            if exc.status_code != 404 or b"No point with id" not in exc.content:
                raise
            log.debug("backfill of %s: a point was deleted meanwhile: %s", name, exc)

    store.read(name, run, missing=None)


def drop_terms(store: Store, name: str) -> None:
    """Removes every point's terms (they were made by another encoding); the dense vector and
    the payload stay."""
    everything = models.FilterSelector(filter=models.Filter())
    store.read(
        name,
        lambda client: client.delete_vectors(name, [VECTOR_NAME], everything, wait=True),
        missing=None,
    )


def record_encoding(store: Store, name: str, encoding: str) -> None:
    metadata = {BM25_METADATA_KEY: {"encoding": encoding}}
    store.read(name, lambda client: client.update_collection(name, metadata=metadata), missing=None)

"""The BM25 side of a collection: which points lack terms, writing terms to points that still
lack them (never creating or touching anything else), terms for points about to be written
(an import, a copy, the migration), and the recorded encoding."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from shared.embedding.bm25 import VECTOR_NAME, Terms, documents_terms
from shared.format.fields import TEXT
from shared.store.filters import Filter, HasVector
from shared.store.interface import Offset, Store, StoredPoint

# Points whose BM25 vector is missing: st-qdrant-memory's, and memory-pool's from before.
LACKING = Filter(must_not=(HasVector(VECTOR_NAME),))


def lacking_terms(store: Store, name: str) -> int:
    """How many points of the collection have no BM25 terms yet (0 for no collection)."""
    return store.count(name, LACKING)


def page_lacking_terms(
    store: Store, name: str, *, limit: int, offset: Offset = None
) -> tuple[list[tuple[str, str]], Offset]:
    """(point id, payload text) of up to `limit` points without terms, and the next offset."""
    page, following = store.page(
        name, query_filter=LACKING, limit=limit, offset=offset, fields=(TEXT,)
    )
    return [(pid, str(payload.get(TEXT, ""))) for pid, payload in page], following


def write_missing_terms(store: Store, name: str, terms: Sequence[tuple[str, Terms]]) -> None:
    """Adds terms to the points that still have none. Conditional on "no BM25 yet", so a flush
    that rewrote a point meanwhile (with terms of its new text) wins; a point deleted meanwhile
    stays deleted."""
    if terms:
        store.write_missing_terms(name, terms)


def drop_terms(store: Store, name: str) -> None:
    """Removes every point's terms (they were made by another encoding); the dense vector and
    the payload stay."""
    store.drop_terms(name)


def record_encoding(store: Store, name: str, encoding: str) -> None:
    store.record_encoding(name, encoding)


def with_terms(points: list[StoredPoint], language: str) -> list[StoredPoint]:
    """Every point given BM25 terms of its payload text where it has none (a point without
    text gets those of "", as the backfill gives it)."""
    lacking = [i for i, p in enumerate(points) if p.sparse is None]
    if not lacking:
        return points
    texts = [str(points[i].payload.get(TEXT, "")) for i in lacking]
    out = list(points)
    for i, terms in zip(lacking, documents_terms(texts, language), strict=True):
        out[i] = replace(points[i], sparse=(list(terms.indices), list(terms.values)))
    return out

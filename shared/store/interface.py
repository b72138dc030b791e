"""The one door to vector storage: what memory-pool asks of a store, in neutral terms (neutral
filters, shared/store/filters.py). Two engines: shared/store/qdrant/ (qdrant-client: any Qdrant
server, and local mode as a test stand-in) and shared/store/edge/ (Qdrant Edge, the embedded engine
`memory-pool serve` uses); shared/store/open.py chooses one. This module imports neither."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from shared.embedding.bm25 import VECTOR_NAME, Terms
from shared.format.fields import INTEGER_FIELDS, KEYWORD_FIELDS
from shared.format.recall_block import RecallHit
from shared.store.browse import Point, StoreBrowsing
from shared.store.filters import Filter
from shared.store.fusion import LegPoint, weighted_dbsf

UPSERT_BATCH = 256
# The payload indexes of every collection memory-pool writes: field -> "keyword" | "integer".
PAYLOAD_INDEXES: Mapping[str, str] = {
    **dict.fromkeys(KEYWORD_FIELDS, "keyword"),
    **dict.fromkeys(INTEGER_FIELDS, "integer"),
}
Fusion = Literal["dbsf", "rrf"]
# An opaque position in a scroll: the next page starts there (None: from the start / the end).
Offset = int | str | None


@dataclass(frozen=True, slots=True)
class PointToWrite:
    """One point to upsert: a UUID string id, its vector and its payload, and its BM25 terms
    (written beside the dense vector when the collection has the sparse vector)."""

    id: str
    vector: list[float]
    payload: dict[str, Any]
    terms: Terms | None = None


@dataclass(frozen=True)
class StoredPoint:
    """A point as stored, for moving a pool (export, import, copy, migration)."""

    id: str
    payload: dict[str, Any]
    vector: list[float] | None  # the unnamed dense vector
    sparse: tuple[list[int], list[float]] | None  # the BM25 sparse vector, if any

    @classmethod
    def read(cls, point_id: str, payload: dict[str, Any] | None, vector: Any) -> StoredPoint:
        """A point as an engine returns it: the vector a bare list (no BM25), or a dict by name
        whose sparse entry has `indices` and `values` (qdrant-client's and Edge's alike)."""
        dense: list[float] | None = None
        sparse: tuple[list[int], list[float]] | None = None
        if isinstance(vector, list):
            dense = [float(x) for x in vector]
        elif isinstance(vector, dict):
            unnamed = vector.get("")
            dense = [float(x) for x in unnamed] if isinstance(unnamed, list) else None
            terms = vector.get(VECTOR_NAME)
            if terms is not None:
                sparse = ([int(i) for i in terms.indices], [float(v) for v in terms.values])
        return cls(point_id, dict(payload or {}), dense, sparse)


@dataclass(frozen=True, slots=True)
class DenseQuery:
    """Dense recall's request: the nearest points by cosine, from `offset`, at or above the
    threshold, under the filter."""

    vector: Sequence[float]
    limit: int
    offset: int
    score_threshold: float | None
    query_filter: Filter | None


@dataclass(frozen=True, slots=True)
class PageRequest:
    """One page of a scroll in id order: `fields` names the only payload fields wanted."""

    query_filter: Filter | None
    limit: int
    offset: Offset
    fields: Sequence[str] | None


@dataclass(frozen=True, slots=True)
class CollectionState:
    """What an existing collection is: read fresh from the store on every call."""

    name: str
    # None when the collection has no single unnamed vector (st-qdrant-memory cannot read it)
    size: int | None
    points_count: int
    # the embedding model recorded in the collection metadata; None when nobody recorded one
    model: str | None
    vector_names: tuple[str, ...] = ()
    indexed_fields: frozenset[str] = field(default_factory=frozenset)
    sparse_names: tuple[str, ...] = ()
    bm25_encoding: str | None = None  # recorded by the backfill (shared.embedding.bm25.encoding_of)

    @property
    def has_bm25(self) -> bool:
        return VECTOR_NAME in self.sparse_names


@dataclass(frozen=True, slots=True)
class FusedQuery:
    """Hybrid recall's one request: both legs' best `prefetch` points under the same filter,
    each leg admitting only points at its own threshold (the cosine one, the BM25 one, so a
    weak lexical match never pushes a good dense one out), fused: dense + w x lexical after
    each leg's normalisation (DBSF), or RRF with the lexical leg's weight w."""

    dense: Sequence[float]
    terms: Terms
    prefetch: int
    score_threshold: float | None
    query_filter: Filter | None
    lexical_threshold: float
    fusion: Fusion
    lexical_weight: float = 1.0

    @property
    def fused_here(self) -> bool:
        """Whether memory-pool fuses the legs itself: Qdrant has no weighted DBSF."""
        return self.fusion == "dbsf" and self.lexical_weight != 1.0


@dataclass(frozen=True, slots=True)
class FusedPoint:
    id: str
    fused_score: float
    payload: dict
    cosine: float | None = None  # known when the legs were fused here and the dense one had it


class LexicalUnavailable(Exception):
    """The collection refused the fused query (its BM25 vector is gone: made again by another
    tool without it); the caller recalls dense."""


class Store(StoreBrowsing, ABC):
    """Collections and points for memory-pool. Reads for people (pages newest first, chunks
    per day) are built on these methods in StoreBrowsing."""

    # collections whose BM25 vector this process has seen (True) or found refused (False);
    # an upsert writes terms only where it is known to exist
    bm25: dict[str, bool]

    @property
    @abstractmethod
    def local(self) -> bool:
        """A brute-force engine that evaluates payload filters in Python (qdrant-client's local
        mode): callers filter what they can themselves rather than ask it to."""

    @property
    def kind(self) -> str:
        """How the operator sees this store in logs: "server", "embedded" or "local"."""
        return "local" if self.local else "server"

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def ping(self) -> bool:
        """Whether the store answers; never raises."""

    # --- collections ---------------------------------------------------------------------

    @abstractmethod
    def collection(self, name: str) -> CollectionState | None: ...

    @abstractmethod
    def collection_names(self) -> list[str]:
        """Every collection the store holds, whoever made it; sorted."""

    @abstractmethod
    def ensure_collection(self, name: str, *, size: int, model: str) -> CollectionState:
        """Creates the collection, or checks an existing one and records our model on it; the
        BM25 sparse vector and the payload indexes are added where missing."""

    # --- points ----------------------------------------------------------------------------

    @abstractmethod
    def upsert(self, name: str, points: Sequence[PointToWrite]) -> None:
        """Raises CollectionMissing when the collection does not exist."""

    def query(
        self,
        name: str,
        vector: Sequence[float],
        *,
        limit: int,
        offset: int = 0,
        score_threshold: float | None,
        query_filter: Filter | None = None,
    ) -> list[RecallHit]:
        """Nearest points by cosine; a missing collection (a new agent) has none. A vector of
        the wrong size raises DimensionMismatch."""
        return self.nearest(name, DenseQuery(vector, limit, offset, score_threshold, query_filter))

    @abstractmethod
    def nearest(self, name: str, query: DenseQuery) -> list[RecallHit]:
        """query() as one value: what each engine implements."""

    def fused_query(self, name: str, query: FusedQuery) -> list[FusedPoint]:
        """Both legs' best `prefetch` points under the same filter, fused (at most 2 x prefetch);
        raises LexicalUnavailable when the collection refuses it. In the store where it can
        express the fusion, else from both legs' scored points (shared/store/fusion.py)."""
        if not query.fused_here:
            return self.fused_in_store(name, query)
        dense, lexical = self.fusion_legs(name, query)
        return [
            FusedPoint(p.id, p.score, p.payload, p.cosine)
            for p in weighted_dbsf(dense, lexical, query.lexical_weight)
        ]

    @abstractmethod
    def fused_in_store(self, name: str, query: FusedQuery) -> list[FusedPoint]:
        """fused_query by the store's own fusion (DBSF, or RRF weighted by the lexical weight)."""

    @abstractmethod
    def fusion_legs(self, name: str, query: FusedQuery) -> tuple[list[LegPoint], list[LegPoint]]:
        """The dense and the lexical leg's scored points, best first, as fused_in_store
        prefetches them, in one request where the store takes a batch; empty for a missing
        collection, LexicalUnavailable when the collection refuses the lexical leg."""

    @abstractmethod
    def cosines(self, name: str, ids: Sequence[str], dense: Sequence[float]) -> dict[str, float]:
        """The dense cosine of the given points (the ones that exist)."""

    def page(
        self,
        name: str,
        *,
        query_filter: Filter | None = None,
        limit: int,
        offset: Offset = None,
        fields: Sequence[str] | None = None,
    ) -> tuple[list[Point], Offset]:
        """One page of (id, payload) in id order, and where the next starts (None at the end);
        `fields` names the only payload fields wanted. Empty for a missing collection."""
        return self.read_page(name, PageRequest(query_filter, limit, offset, fields))

    @abstractmethod
    def read_page(self, name: str, request: PageRequest) -> tuple[list[Point], Offset]:
        """page() as one value: what each engine implements."""

    def scroll_payloads(
        self,
        name: str,
        *,
        query_filter: Filter | None = None,
        batch: int = 256,
        fields: Sequence[str] | None = None,
    ) -> Iterator[Point]:
        """(point id, payload) of every match, one page at a time; nothing is held between
        pages, so a consumer may take its time."""
        offset: Offset = None
        while True:
            found, offset = self.page(
                name, query_filter=query_filter, limit=batch, offset=offset, fields=fields
            )
            yield from found
            if offset is None:
                return

    @abstractmethod
    def ordered_page(
        self, name: str, query_filter: Filter | None, limit: int, *, start_from: int | None = None
    ) -> list[Point] | None:
        """Up to `limit` matches by descending `timestamp` (from `start_from` down, inclusive);
        None when the collection has no timestamp index to order by."""

    @abstractmethod
    def point(self, name: str, point_id: str) -> dict[str, Any] | None:
        """One point's payload; None when the point or the collection does not exist."""

    @abstractmethod
    def delete_points(self, name: str, ids: Sequence[str]) -> int:
        """Deletes the points; returns how many of them existed."""

    @abstractmethod
    def count(self, name: str, query_filter: Filter | None = None) -> int: ...

    @abstractmethod
    def facet_counts(self, name: str, key: str, *, limit: int = 100) -> dict[str, int]:
        """How many points hold each value of a keyword field (exact)."""

    # --- BM25 terms (the backfill) -----------------------------------------------------------

    @abstractmethod
    def write_missing_terms(self, name: str, terms: Sequence[tuple[str, Terms]]) -> None:
        """Adds terms to the points that still have none; never creates a point (one deleted
        meanwhile stays deleted) and never overwrites terms a flush wrote meanwhile."""

    @abstractmethod
    def drop_terms(self, name: str) -> None:
        """Removes every point's terms; the dense vector and the payload stay."""

    @abstractmethod
    def record_encoding(self, name: str, encoding: str) -> None:
        """Records how the collection's BM25 terms were made."""

    def give_way(self, worked: float) -> float:
        """Called by bulk work (the backfill) after a step of `worked` seconds: returns once
        the recalls of this process may go first; the seconds it waited. A server runs its
        recalls in its own threads: nothing to wait for here."""
        return 0.0

    # --- moving a pool -------------------------------------------------------------------------

    def iter_points(
        self, name: str, *, with_vectors: bool = True, page: int = 256
    ) -> Iterator[StoredPoint]:
        """Every point, in id order, page by page (constant memory); empty if no collection."""
        offset: Offset = None
        while True:
            found, offset = self.points_page(name, offset, with_vectors=with_vectors, limit=page)
            yield from found
            if offset is None:
                return

    @abstractmethod
    def points_page(
        self, name: str, offset: Offset, *, with_vectors: bool, limit: int
    ) -> tuple[list[StoredPoint], Offset]:
        """One page of iter_points from `offset`, and where the next starts (None at the end)."""

    @abstractmethod
    def write_points(self, name: str, points: Sequence[StoredPoint]) -> None:
        """Upserts exactly as given (sparse only where the collection has BM25)."""

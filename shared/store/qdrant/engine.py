"""The Store on qdrant-client: any Qdrant server (compose, Qdrant Cloud, the user's own, which
st-qdrant-memory shares), and local mode, kept only as a test stand-in for a server."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import UnexpectedResponse

from shared.embedding.bm25 import VECTOR_NAME, Terms
from shared.errors import CollectionMissing, DimensionMismatch
from shared.format.fields import TIMESTAMP
from shared.format.recall_block import RecallHit
from shared.store import interface as store
from shared.store.browse import Point
from shared.store.filters import Filter, HasIds
from shared.store.memory_query import qdrant_id
from shared.store.qdrant.collection_setup import CollectionSetup
from shared.store.qdrant.connection import Connection, refused
from shared.store.qdrant.filters import to_qdrant
from shared.store.qdrant.hybrid import HybridQueries
from shared.store.qdrant.rules import (
    BM25_METADATA_KEY,
    collection_state,
    is_missing,
    point_vectors,
    sparse_vector,
)

if TYPE_CHECKING:
    from shared.settings import Settings

log = logging.getLogger(__name__)

# How long an upsert trusts "this collection has no BM25 vector": another process (the
# backfill's worker) may add it back meanwhile, and a writer that never looked again would
# write every chunk without terms until restarted.
BM25_RECHECK_SECONDS = 30.0
# A query vector of the wrong size: a server's "Vector dimension error", local mode's numpy
# "not aligned: 4 (dim 1) != 3 (dim 0)".
_DIMENSION_ERROR = re.compile(r"\bdim(ension)?\b")

T = TypeVar("T")


class QdrantStore(CollectionSetup, HybridQueries, store.Store):
    """Qdrant collections and points for memory-pool; the server and local mode alike."""

    def __init__(
        self,
        client: QdrantClient,
        *,
        local: bool,
        bm25_recheck_seconds: float = BM25_RECHECK_SECONDS,
    ) -> None:
        self.connection = Connection(client, local=local)
        self._client = client
        self._local = local
        # collections whose BM25 vector this process has seen (True) or found refused (False);
        # an upsert writes terms only where it is known to exist
        self.bm25: dict[str, bool] = {}
        self._bm25_read_at: dict[str, float] = {}  # when a "no" above was learnt (monotonic)
        self._bm25_recheck = bm25_recheck_seconds

    @classmethod
    def open(cls, settings: Settings) -> QdrantStore:
        if settings.qdrant_url:
            client = QdrantClient(
                url=settings.qdrant_url,
                api_key=settings.qdrant_api_key,
                # the client takes whole seconds; a sub-second setting must not become "no wait"
                timeout=max(1, int(settings.qdrant_timeout_seconds)),
                prefer_grpc=False,
                # Servers of other versions are handled by feature detection (a refused call
                # falls back), and the client's check runs in a thread of its own that warns
                # whenever the server is down at that moment, e.g. a worker started first.
                check_compatibility=False,
            )
            return cls(client, local=False)
        path = settings.data_dir / "qdrant"
        path.mkdir(parents=True, exist_ok=True)
        # calls come from any thread but run under the store's lock, so SQLite's
        # same-thread check would only refuse safe calls
        local = QdrantClient(path=str(path), force_disable_check_same_thread=True)
        return cls(local, local=True)

    @property
    def local(self) -> bool:
        """Local mode: brute-force search that evaluates payload filters in Python."""
        return self._local

    def close(self) -> None:
        self.connection.close()

    def ping(self) -> bool:
        try:
            with self.connection.io() as client:
                client.get_collections()
        except Exception:  # a health check answers, it never raises
            log.debug("Qdrant ping failed", exc_info=True)
            return False
        return True

    # --- collections ---------------------------------------------------------------------

    def collection(self, name: str) -> store.CollectionState | None:
        info = self.connection.read(name, lambda client: client.get_collection(name), missing=None)
        return None if info is None else collection_state(name, info)

    def collection_names(self) -> list[str]:
        with self.connection.io() as client:
            return sorted(c.name for c in client.get_collections().collections)

    # --- points ----------------------------------------------------------------------------

    def upsert(self, name: str, points: Sequence[store.PointToWrite]) -> None:
        """Both vectors in the same request where the collection has BM25, the dense alone
        elsewhere (st-qdrant-memory's points, older servers: the backfill adds the terms)."""
        for start in range(0, len(points), store.UPSERT_BATCH):
            batch = points[start : start + store.UPSERT_BATCH]
            # one lock hold per batch, so a long import does not starve recall in local mode
            sparse = any(p.terms is not None for p in batch) and self._writes_terms(name)
            try:
                self._upsert_batch(name, batch, sparse=sparse)
            except (UnexpectedResponse, ValueError) as e:
                if is_missing(e, name):
                    raise CollectionMissing(f"collection {name!r} does not exist") from e
                if not (sparse and VECTOR_NAME in str(e)):
                    raise refused(e) from e
                # made again without it (by st-qdrant-memory?): dense now, the vector next time
                log.warning("collection %s lost its BM25 vector; writing dense only", name)
                self._learn_bm25(name, False)
                self._upsert_batch(name, batch, sparse=False)

    def _learn_bm25(self, name: str, has: bool) -> None:
        self.bm25[name] = has
        self._bm25_read_at[name] = time.monotonic()

    def _writes_terms(self, name: str) -> bool:
        """Whether an upsert carries BM25 terms: the collection is known to have the vector,
        or a "no" older than BM25_RECHECK_SECONDS (or none at all) is read again from Qdrant."""
        if self.bm25.get(name):
            return True
        learnt = self._bm25_read_at.get(name) if name in self.bm25 else None
        if learnt is not None and time.monotonic() - learnt < self._bm25_recheck:
            return False
        state = self.collection(name)
        self._learn_bm25(name, state is not None and state.has_bm25)
        return self.bm25[name]

    def _upsert_batch(
        self, name: str, batch: Sequence[store.PointToWrite], *, sparse: bool
    ) -> None:
        structs = [
            models.PointStruct(
                id=qdrant_id(p.id), vector=point_vectors(p, sparse=sparse), payload=p.payload
            )
            for p in batch
        ]
        with self.connection.io() as client:
            client.upsert(name, structs, wait=True)

    def nearest(self, name: str, query: store.DenseQuery) -> list[RecallHit]:
        """Nearest points by cosine; a missing collection (a new agent) has none."""
        try:
            response = self.connection.read(
                name,
                lambda client: client.query_points(
                    name,
                    query=list(query.vector),
                    limit=query.limit,
                    offset=query.offset,
                    score_threshold=query.score_threshold,
                    query_filter=to_qdrant(query.query_filter),
                    with_payload=True,
                    with_vectors=False,
                ),
                missing=None,
            )
        except (UnexpectedResponse, ValueError) as e:
            # A vector of the wrong size (a collection st-qdrant-memory made with another
            # embedding model) when the error says so; not a filter the server refused (a
            # /qdrant client's, on a key no JSON path names), as Qdrant Edge tells them apart
            if not _DIMENSION_ERROR.search(str(e)):
                raise
            raise DimensionMismatch.of_query(name, len(query.vector), e) from e
        if response is None:
            return []
        return [
            RecallHit(id=str(p.id), score=p.score, payload=p.payload or {}) for p in response.points
        ]

    def read_page(self, name: str, request: store.PageRequest) -> tuple[list[Point], store.Offset]:
        fields = request.fields
        with_payload: bool | models.PayloadSelectorInclude = (
            True if fields is None else models.PayloadSelectorInclude(include=list(fields))
        )
        nothing: tuple[list[models.Record], models.ExtendedPointId | None] = ([], None)
        found, following = self.connection.read(
            name,
            lambda client: client.scroll(
                name,
                scroll_filter=to_qdrant(request.query_filter),
                limit=request.limit,
                offset=request.offset,
                with_payload=with_payload,
                with_vectors=False,
            ),
            missing=nothing,
        )
        return [(str(p.id), dict(p.payload or {})) for p in found], _offset(following)

    def ordered_page(
        self, name: str, query_filter: Filter | None, limit: int, *, start_from: int | None = None
    ) -> list[Point] | None:
        order = models.OrderBy(
            key=TIMESTAMP, direction=models.Direction.DESC, start_from=start_from
        )
        flt = to_qdrant(query_filter)

        def call(client: QdrantClient) -> list[Point]:
            records, _ = client.scroll(
                name, scroll_filter=flt, limit=limit, order_by=order,
                with_payload=True, with_vectors=False,
            )  # fmt: skip
            return [(str(r.id), dict(r.payload or {})) for r in records]

        none: list[Point] = []
        try:
            return self.connection.read(name, call, missing=none)
        except UnexpectedResponse as e:
            if e.status_code != 400 or b"range index" not in e.content:
                raise
        return None  # no `timestamp` index (a collection st-qdrant-memory made)

    def point(self, name: str, point_id: str) -> dict[str, Any] | None:
        none: list[models.Record] = []
        found = self.connection.read(
            name,
            lambda client: client.retrieve(name, [qdrant_id(point_id)], with_payload=True),
            missing=none,
        )
        return dict(found[0].payload or {}) if found else None

    def delete_points(self, name: str, ids: Sequence[str]) -> int:
        """Deletes the points; returns how many of them existed."""
        if not ids:
            return 0
        by_id = to_qdrant(Filter(must=(HasIds(tuple(ids)),)))

        def run(client: QdrantClient) -> int:
            found = client.count(name, count_filter=by_id, exact=True).count
            if found:
                points: list[models.ExtendedPointId] = [qdrant_id(i) for i in ids]
                client.delete(name, models.PointIdsList(points=points), wait=True)
            return found

        return self.connection.read(name, run, missing=0)

    def count(self, name: str, query_filter: Filter | None = None) -> int:
        flt = to_qdrant(query_filter)
        return self.connection.read(
            name,
            lambda client: client.count(name, count_filter=flt, exact=True).count,
            missing=0,
        )

    def facet_counts(self, name: str, key: str, *, limit: int = 100) -> dict[str, int]:
        """How many points hold each value of a keyword field (exact)."""
        response = self.connection.read(
            name,
            lambda client: client.facet(name, key=key, limit=limit, exact=True),
            missing=None,
        )
        if response is None:
            return {}
        return {str(hit.value): int(hit.count) for hit in response.hits}

    # --- BM25 terms ------------------------------------------------------------------------

    def write_missing_terms(self, name: str, terms: Sequence[tuple[str, Terms]]) -> None:
        points = [
            models.PointVectors(id=pid, vector={VECTOR_NAME: sparse_vector(t)}) for pid, t in terms
        ]
        if not points:
            return
        lacking = models.Filter(must_not=[models.HasVectorCondition(has_vector=VECTOR_NAME)])

        def run(client: QdrantClient) -> None:
            try:
                client.update_vectors(name, points, update_filter=lacking, wait=True)
            except KeyError as exc:  # local mode's "no such point"
                log.debug("backfill of %s: point %s was deleted meanwhile", name, exc)
            except UnexpectedResponse as exc:
                if exc.status_code != 404 or b"No point with id" not in exc.content:
                    raise
                # `update_vectors` never creates a point: Qdrant answers 404 for a deleted
                # one after writing the others
                log.debug("backfill of %s: a point was deleted meanwhile: %s", name, exc)

        self.connection.read(name, run, missing=None)

    def drop_terms(self, name: str) -> None:
        everything = models.FilterSelector(filter=models.Filter())
        self.connection.read(
            name,
            lambda client: client.delete_vectors(name, [VECTOR_NAME], everything, wait=True),
            missing=None,
        )

    def record_encoding(self, name: str, encoding: str) -> None:
        metadata = {BM25_METADATA_KEY: {"encoding": encoding}}
        self.connection.read(
            name, lambda client: client.update_collection(name, metadata=metadata), missing=None
        )

    # --- moving a pool -----------------------------------------------------------------------

    def points_page(
        self, name: str, offset: store.Offset, *, with_vectors: bool, limit: int
    ) -> tuple[list[store.StoredPoint], store.Offset]:
        nothing: tuple[list[models.Record], models.ExtendedPointId | None] = ([], None)
        records, following = self.connection.read(
            name,
            lambda client: client.scroll(
                name, limit=limit, offset=offset, with_payload=True, with_vectors=with_vectors
            ),
            missing=nothing,
        )
        found = [store.StoredPoint.read(str(r.id), r.payload, r.vector) for r in records]
        return found, _offset(following)

    def write_points(self, name: str, points: Sequence[store.StoredPoint]) -> None:
        sparse = self.bm25.get(name)
        if sparse is None:
            state = self.collection(name)
            sparse = self.bm25[name] = bool(state and state.has_bm25)
        for start in range(0, len(points), store.UPSERT_BATCH):
            structs = [
                models.PointStruct(
                    id=qdrant_id(p.id), vector=_vectors_of(p, sparse=sparse), payload=p.payload
                )
                for p in points[start : start + store.UPSERT_BATCH]
            ]
            try:
                with self.connection.io() as client:
                    client.upsert(name, structs, wait=True)
            except (UnexpectedResponse, ValueError) as e:
                if is_missing(e, name):
                    raise CollectionMissing(f"collection {name!r} does not exist") from e
                raise

    def read(self, name: str, call: Callable[[QdrantClient], T], *, missing: T) -> T:
        """`call` with the client, under the same lock and error mapping; `missing` when the
        collection does not exist (for tests and tools that need the raw client)."""
        return self.connection.read(name, call, missing=missing)


def _offset(raw: models.ExtendedPointId | None) -> store.Offset:
    return raw if raw is None or isinstance(raw, int) else str(raw)


def _vectors_of(point: store.StoredPoint, *, sparse: bool) -> Any:
    vectors: dict[str, Any] = {}
    if point.vector is not None:
        vectors[""] = list(point.vector)
    if sparse and point.sparse is not None:
        indices, values = point.sparse
        vectors[VECTOR_NAME] = models.SparseVector(indices=list(indices), values=list(values))
    return vectors

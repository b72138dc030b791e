"""The Store on qdrant-client: any Qdrant server (compose, Qdrant Cloud, the user's own, which
st-qdrant-memory shares), and local mode, kept only as a test stand-in for a server."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from qdrant_client import QdrantClient, models
from qdrant_client.common.client_exceptions import ResourceExhaustedResponse
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from shared import store
from shared.bm25 import VECTOR_NAME, Terms
from shared.errors import CollectionMissing, DimensionMismatch, StoreRefused, UpstreamUnavailable
from shared.fields import TIMESTAMP
from shared.filters import Filter, HasIds
from shared.format import RecallHit
from shared.memory_query import qdrant_id
from shared.store_browse import Point
from shared.store_qdrant_filters import to_qdrant
from shared.store_rules import (
    BM25_CONFIG,
    BM25_METADATA_KEY,
    check_compatible,
    collection_state,
    is_conflict,
    is_missing,
    is_rejected_input,
    model_metadata,
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
# Statuses with which Qdrant refuses a write for what it holds (a name, a point, a size).
CONTENT_REFUSALS = frozenset({400, 413, 422})

T = TypeVar("T")

SCHEMAS = {"keyword": models.PayloadSchemaType.KEYWORD, "integer": models.PayloadSchemaType.INTEGER}
FUSIONS: dict[str, models.Fusion] = {"dbsf": models.Fusion.DBSF, "rrf": models.Fusion.RRF}


class QdrantStore(store.Store):
    """Qdrant collections and points for memory-pool; the server and local mode alike."""

    def __init__(
        self,
        client: QdrantClient,
        *,
        local: bool,
        bm25_recheck_seconds: float = BM25_RECHECK_SECONDS,
    ) -> None:
        self._client = client
        self._local = local
        # local mode is not thread-safe (qdrant-client issue 1193): every call takes one lock
        self._lock: AbstractContextManager[Any] = threading.Lock() if local else nullcontext()
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
        with self._lock:
            self._client.close()

    def ping(self) -> bool:
        try:
            with self._io() as client:
                client.get_collections()
        except Exception:  # a health check answers, it never raises
            log.debug("Qdrant ping failed", exc_info=True)
            return False
        return True

    # --- collections ---------------------------------------------------------------------

    def collection(self, name: str) -> store.CollectionState | None:
        info = self._read(name, lambda client: client.get_collection(name), missing=None)
        return None if info is None else collection_state(name, info)

    def collection_names(self) -> list[str]:
        with self._io() as client:
            return sorted(c.name for c in client.get_collections().collections)

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
                with self._io() as client:
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
            with self._io() as client:
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
            with self._io() as client:
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
                with self._io() as client:
                    client.create_payload_index(state.name, field_name, SCHEMAS[schema], wait=True)

    def _require(self, name: str) -> store.CollectionState:
        state = self.collection(name)
        if state is None:
            # deleted between two of our calls: someone else is managing it, try again later
            raise UpstreamUnavailable(f"Qdrant collection {name} disappeared while being set up")
        return state

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
                    raise _refused(e) from e
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
            models.PointStruct(id=p.id, vector=point_vectors(p, sparse=sparse), payload=p.payload)
            for p in batch
        ]
        with self._io() as client:
            client.upsert(name, structs, wait=True)

    def nearest(self, name: str, query: store.DenseQuery) -> list[RecallHit]:
        """Nearest points by cosine; a missing collection (a new agent) has none."""
        try:
            response = self._read(
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
            # Our own filter is well formed: a refused query is a vector of the wrong size,
            # e.g. a collection st-qdrant-memory made with another embedding model.
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
        found, following = self._read(
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
            return self._read(name, call, missing=none)
        except UnexpectedResponse as e:
            if e.status_code != 400 or b"range index" not in e.content:
                raise
        return None  # no `timestamp` index (a collection st-qdrant-memory made)

    def point(self, name: str, point_id: str) -> dict[str, Any] | None:
        none: list[models.Record] = []
        found = self._read(
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

        return self._read(name, run, missing=0)

    def count(self, name: str, query_filter: Filter | None = None) -> int:
        flt = to_qdrant(query_filter)
        return self._read(
            name,
            lambda client: client.count(name, count_filter=flt, exact=True).count,
            missing=0,
        )

    def facet_counts(self, name: str, key: str, *, limit: int = 100) -> dict[str, int]:
        """How many points hold each value of a keyword field (exact)."""
        response = self._read(
            name,
            lambda client: client.facet(name, key=key, limit=limit, exact=True),
            missing=None,
        )
        if response is None:
            return {}
        return {str(hit.value): int(hit.count) for hit in response.hits}

    # --- hybrid recall ---------------------------------------------------------------------

    def fused_query(self, name: str, query: store.FusedQuery) -> list[store.FusedPoint]:
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
            response = self._read(
                name,
                lambda client: client.query_points(
                    name,
                    prefetch=legs,
                    query=models.FusionQuery(fusion=FUSIONS[query.fusion]),
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

    def cosines(self, name: str, ids: Sequence[str], dense: Sequence[float]) -> dict[str, float]:
        if not ids:
            return {}
        only = to_qdrant(Filter(must=(HasIds(tuple(ids)),)))

        def run(client: QdrantClient) -> models.QueryResponse:
            return client.query_points(
                name, query=list(dense), query_filter=only, limit=len(ids), with_payload=False
            )

        answer = self._read(name, run, missing=None)
        return {} if answer is None else {str(p.id): p.score for p in answer.points}

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

        self._read(name, run, missing=None)

    def drop_terms(self, name: str) -> None:
        everything = models.FilterSelector(filter=models.Filter())
        self._read(
            name,
            lambda client: client.delete_vectors(name, [VECTOR_NAME], everything, wait=True),
            missing=None,
        )

    def record_encoding(self, name: str, encoding: str) -> None:
        metadata = {BM25_METADATA_KEY: {"encoding": encoding}}
        self._read(
            name, lambda client: client.update_collection(name, metadata=metadata), missing=None
        )

    # --- moving a pool -----------------------------------------------------------------------

    def points_page(
        self, name: str, offset: store.Offset, *, with_vectors: bool, limit: int
    ) -> tuple[list[store.StoredPoint], store.Offset]:
        nothing: tuple[list[models.Record], models.ExtendedPointId | None] = ([], None)
        records, following = self._read(
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
                with self._io() as client:
                    client.upsert(name, structs, wait=True)
            except (UnexpectedResponse, ValueError) as e:
                if is_missing(e, name):
                    raise CollectionMissing(f"collection {name!r} does not exist") from e
                raise

    # --- plumbing --------------------------------------------------------------------------

    @contextmanager
    def _io(self) -> Iterator[QdrantClient]:
        """The client, under the local-mode lock, with connection trouble as UpstreamUnavailable."""
        with self._lock:
            try:
                yield self._client
            except ResourceExhaustedResponse as e:
                raise UpstreamUnavailable(
                    f"Qdrant is rate limiting: {e}", retry_after=e.retry_after_s
                ) from e
            except (ResponseHandlingException, httpx.HTTPError) as e:
                raise UpstreamUnavailable(f"Qdrant cannot be reached: {e}") from e
            except UnexpectedResponse as e:
                if e.status_code is None or e.status_code >= 500 or e.status_code == 429:
                    raise UpstreamUnavailable(f"Qdrant is unavailable: {e}") from e
                raise

    def read(self, name: str, call: Callable[[QdrantClient], T], *, missing: T) -> T:
        """`call` with the client, under the same lock and error mapping; `missing` when the
        collection does not exist (for tests and tools that need the raw client)."""
        return self._read(name, call, missing=missing)

    def _read(self, name: str, call: Callable[[QdrantClient], T], *, missing: T) -> T:
        """`call` through `_io`; `missing` when the collection does not exist."""
        try:
            with self._io() as client:
                return call(client)
        except (UnexpectedResponse, ValueError) as e:
            if is_missing(e, name):
                return missing
            raise


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


def _refused(error: Exception) -> Exception:
    """Qdrant's refusal of the content of a write (400/413/422) as the store's StoreRefused;
    anything else (a 5xx, a refused key) as it is."""
    if isinstance(error, UnexpectedResponse) and error.status_code in CONTENT_REFUSALS:
        return StoreRefused(f"Qdrant refused the write ({error.status_code}): {_message(error)}")
    return error


def _message(error: UnexpectedResponse) -> str:
    try:
        return str(json.loads(error.content)["status"]["error"])
    except (ValueError, KeyError, TypeError):
        return error.content.decode("utf-8", "replace")[:500]

"""The one home of Qdrant I/O: collections, points and queries, all through qdrant-client."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from qdrant_client import QdrantClient, models
from qdrant_client.common.client_exceptions import ResourceExhaustedResponse
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from shared.errors import (
    CollectionMissing,
    DimensionMismatch,
    ModelMismatch,
    UpstreamUnavailable,
)
from shared.format import RecallHit
from shared.store_browse import StoreBrowsing

if TYPE_CHECKING:
    from shared.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")

# Key of our entry in the collection metadata; other tools may keep their own keys beside it.
METADATA_KEY = "memory_pool"
UPSERT_BATCH = 256
KEYWORD_FIELDS = ("source", "messageIdList", "userIdList", "channelId", "guildId", "conversationId")
PAYLOAD_INDEXES: Mapping[str, models.PayloadSchemaType] = {
    **dict.fromkeys(KEYWORD_FIELDS, models.PayloadSchemaType.KEYWORD),
    "timestamp": models.PayloadSchemaType.INTEGER,
}


@dataclass(frozen=True, slots=True)
class PointToWrite:
    """One point to upsert: a UUID string id, its vector and its payload."""

    id: str
    vector: list[float]
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CollectionState:
    """What an existing collection is: read fresh from Qdrant on every call."""

    name: str
    # None when the collection has no single unnamed vector (st-qdrant-memory cannot read it)
    size: int | None
    points_count: int
    # the embedding model recorded in the collection metadata; None when nobody recorded one
    model: str | None
    vector_names: tuple[str, ...] = ()
    indexed_fields: frozenset[str] = field(default_factory=frozenset)


class Store(StoreBrowsing):
    """Qdrant collections and points for memory-pool; the server and local mode alike.

    Reads for people (pages newest first, one point, chunks per day) are in StoreBrowsing."""

    def __init__(self, client: QdrantClient, *, local: bool) -> None:
        self._client = client
        self._local = local
        # local mode is not thread-safe (qdrant-client issue 1193): every call takes one lock
        self._lock: AbstractContextManager[Any] = threading.Lock() if local else nullcontext()

    @classmethod
    def open(cls, settings: Settings) -> Store:
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

    def collection(self, name: str) -> CollectionState | None:
        info = self._read(name, lambda client: client.get_collection(name), missing=None)
        return None if info is None else _state(name, info)

    def ensure_collection(self, name: str, *, size: int, model: str) -> None:
        """Creates the collection, or checks an existing one and records our model on it."""
        state = self.collection(name) or self._create(name, size=size, model=model)
        _check_compatible(state, size=size, model=model)
        if state.model is None:
            state = self._record_model(name, size=size, model=model)
        self._ensure_indexes(state)

    def _create(self, name: str, *, size: int, model: str) -> CollectionState:
        vectors = models.VectorParams(size=size, distance=models.Distance.COSINE)
        try:
            self._create_collection(name, vectors, _metadata(model, size))
        except (UnexpectedResponse, ValueError) as e:
            if not _is_conflict(e):
                raise
            # another worker created it first; it is judged like any existing collection
            log.info("Qdrant collection %s was created concurrently", name)
        return self._require(name)

    def _create_collection(
        self, name: str, vectors: models.VectorParams, metadata: dict[str, Any]
    ) -> None:
        try:
            with self._io() as client:
                client.create_collection(name, vectors_config=vectors, metadata=metadata)
        except UnexpectedResponse as e:
            if _is_conflict(e) or not _is_rejected_input(e):
                raise
            # servers before 1.16 know no collection metadata; the model goes unrecorded
            log.warning("Qdrant refused collection metadata, creating %s without it: %s", name, e)
            with self._io() as client:
                client.create_collection(name, vectors_config=vectors)

    def _record_model(self, name: str, *, size: int, model: str) -> CollectionState:
        try:
            with self._io() as client:
                client.update_collection(name, metadata=_metadata(model, size))
        except UnexpectedResponse as e:
            if not _is_rejected_input(e):
                raise
            log.warning("Qdrant refused collection metadata, model of %s unrecorded: %s", name, e)
        state = self._require(name)
        if state.model is None:
            log.warning("Qdrant kept no collection metadata; model of %s unrecorded", name)
        # a worker configured with another model may have recorded its own at the same moment
        _check_compatible(state, size=size, model=model)
        return state

    def _ensure_indexes(self, state: CollectionState) -> None:
        if self._local:
            return  # local mode ignores payload indexes and warns about each one
        for field_name, schema in PAYLOAD_INDEXES.items():
            if field_name not in state.indexed_fields:
                with self._io() as client:
                    client.create_payload_index(state.name, field_name, schema, wait=True)

    def _require(self, name: str) -> CollectionState:
        state = self.collection(name)
        if state is None:
            # deleted between two of our calls: someone else is managing it, try again later
            raise UpstreamUnavailable(f"Qdrant collection {name} disappeared while being set up")
        return state

    # --- points ----------------------------------------------------------------------------

    def upsert(self, name: str, points: Sequence[PointToWrite]) -> None:
        for start in range(0, len(points), UPSERT_BATCH):
            batch = [
                models.PointStruct(id=p.id, vector=list(p.vector), payload=p.payload)
                for p in points[start : start + UPSERT_BATCH]
            ]
            # one lock hold per batch, so a long import does not starve recall in local mode
            try:
                with self._io() as client:
                    client.upsert(name, batch, wait=True)
            except (UnexpectedResponse, ValueError) as e:
                if _is_missing(e, name):
                    raise CollectionMissing(f"collection {name!r} does not exist") from e
                raise

    def query(
        self,
        name: str,
        vector: Sequence[float],
        *,
        limit: int,
        offset: int = 0,
        score_threshold: float | None,
        query_filter: models.Filter | None = None,
    ) -> list[RecallHit]:
        """Nearest points by cosine; a missing collection (a new agent) has none."""
        try:
            response = self._read(
                name,
                lambda client: client.query_points(
                    name,
                    query=list(vector),
                    limit=limit,
                    offset=offset,
                    score_threshold=score_threshold,
                    query_filter=query_filter,
                    with_payload=True,
                    with_vectors=False,
                ),
                missing=None,
            )
        except (UnexpectedResponse, ValueError) as e:
            # Our own filter is well formed: a refused query is a vector of the wrong size,
            # e.g. a collection st-qdrant-memory made with another embedding model.
            raise DimensionMismatch(
                f"collection {name!r} refused a query vector of {len(vector)} dimensions; "
                f"it was made with another embedding model: {e}"
            ) from e
        if response is None:
            return []
        return [
            RecallHit(id=str(p.id), score=p.score, payload=p.payload or {}) for p in response.points
        ]

    def scroll_payloads(
        self, name: str, *, query_filter: models.Filter | None = None, batch: int = 256
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(point id, payload) of every match, one page per request; the lock is not held
        between pages, so a consumer may take its time."""
        offset: models.ExtendedPointId | None = None
        while True:
            page, offset = self._read(
                name,
                lambda client, start=offset: client.scroll(
                    name,
                    scroll_filter=query_filter,
                    limit=batch,
                    offset=start,
                    with_payload=True,
                    with_vectors=False,
                ),
                missing=([], None),
            )
            for point in page:
                yield str(point.id), dict(point.payload or {})
            if offset is None:
                return

    def delete_points(self, name: str, ids: Sequence[str]) -> int:
        """Deletes the points; returns how many of them existed."""
        if not ids:
            return 0
        by_id = models.Filter(must=[models.HasIdCondition(has_id=list(ids))])

        def run(client: QdrantClient) -> int:
            found = client.count(name, count_filter=by_id, exact=True).count
            if found:
                client.delete(name, models.PointIdsList(points=list(ids)), wait=True)
            return found

        return self._read(name, run, missing=0)

    def count(self, name: str, query_filter: models.Filter | None = None) -> int:
        return self._read(
            name,
            lambda client: client.count(name, count_filter=query_filter, exact=True).count,
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

    def _read(self, name: str, call: Callable[[QdrantClient], T], *, missing: T) -> T:
        """`call` through `_io`; `missing` when the collection does not exist."""
        try:
            with self._io() as client:
                return call(client)
        except (UnexpectedResponse, ValueError) as e:
            if _is_missing(e, name):
                return missing
            raise


def _metadata(model: str, size: int) -> dict[str, Any]:
    return {METADATA_KEY: {"embedding_model": model, "dimensions": size}}


def _state(name: str, info: models.CollectionInfo) -> CollectionState:
    vectors = info.config.params.vectors
    single = isinstance(vectors, models.VectorParams)
    ours = (info.config.metadata or {}).get(METADATA_KEY)
    model = ours.get("embedding_model") if isinstance(ours, dict) else None
    return CollectionState(
        name=name,
        size=vectors.size if single else None,
        points_count=info.points_count or 0,
        model=model if isinstance(model, str) else None,
        vector_names=() if single else tuple(vectors or {}),
        indexed_fields=frozenset(info.payload_schema or {}),
    )


def _check_compatible(state: CollectionState, *, size: int, model: str) -> None:
    if state.size is None:
        names = ", ".join(state.vector_names) or "none"
        raise DimensionMismatch(
            f"Qdrant collection {state.name} has named vectors ({names}), not one unnamed "
            f"vector of size {size}; st-qdrant-memory cannot read it"
        )
    if state.size != size:
        raise DimensionMismatch(
            f"Qdrant collection {state.name} holds vectors of size {state.size}, "
            f"the embedding model gives {size}"
        )
    if state.model is not None and state.model != model:
        raise ModelMismatch(
            f"Qdrant collection {state.name} was written with embedding model {state.model}, "
            f"configured is {model}"
        )


def _is_missing(error: Exception, name: str) -> bool:
    # the server answers 404; local mode raises ValueError("Collection <name> not found")
    if isinstance(error, UnexpectedResponse):
        return error.status_code == 404
    return f"Collection {name} not found" in str(error)


def _is_conflict(error: Exception) -> bool:
    # the server answers 409 (older ones 400 "already exists"); local mode raises ValueError
    if isinstance(error, UnexpectedResponse):
        return error.status_code == 409 or (
            error.status_code == 400 and b"already exists" in error.content
        )
    return "already exists" in str(error)


def _is_rejected_input(error: UnexpectedResponse) -> bool:
    return error.status_code in (400, 422)

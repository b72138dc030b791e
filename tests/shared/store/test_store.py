"""Checks shared/store/interface.py against real qdrant-client: local mode, and the REST path."""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from qdrant_client import QdrantClient, models

from shared.errors import DimensionMismatch, ModelMismatch, UpstreamUnavailable
from shared.settings import Settings
from shared.store.edge.engine import EdgeStore
from shared.store.filters import Filter, Match, MatchAny, Range
from shared.store.interface import PAYLOAD_INDEXES, CollectionState, PointToWrite, Store
from shared.store.open import open_store
from shared.store.qdrant.engine import QdrantStore
from tests.support.qdrant_server import QdrantTestServer

NAME = "mem_dr_smith"
DIM = 4
MODEL = "text-embedding-3-large"


def pid(i: int) -> str:
    return str(uuid.UUID(int=i + 1))


def vector(i: int) -> list[float]:
    # cosine to QUERY is 1/sqrt(1 + (i/10)^2): the score falls as i grows
    return [1.0, i / 10, 0.0, 0.0]


QUERY = [1.0, 0.0, 0.0, 0.0]


def score(i: int) -> float:
    return 1 / math.sqrt(1 + (i / 10) ** 2)


def point(i: int, **payload: Any) -> PointToWrite:
    base = {"text": f"chunk {i}", "timestamp": 1_000 * i, "messageIdList": [f"m{i}"]}
    return PointToWrite(id=pid(i), vector=vector(i), payload=base | payload)


@pytest.fixture
def client() -> Iterator[QdrantClient]:
    qdrant = QdrantClient(":memory:")
    yield qdrant
    qdrant.close()


@pytest.fixture
def store(client: QdrantClient) -> Store:
    return QdrantStore(client, local=True)


@pytest.fixture
def filled(store: Store) -> Store:
    store.ensure_collection(NAME, size=DIM, model=MODEL)
    store.upsert(NAME, [point(i, source="hermes" if i % 4 == 3 else "discord") for i in range(12)])
    return store


def st_qdrant_memory_collection(client: QdrantClient) -> list[str]:
    """A collection as st-qdrant-memory makes it: unnamed vector, no metadata, its payload."""
    client.create_collection(NAME, models.VectorParams(size=DIM, distance=models.Distance.COSINE))
    ids = [str(uuid.uuid4()) for _ in range(3)]
    payloads = [
        {
            "text": f"[2024-06-10]\nAlex: hi {i}\nDr. Smith: hello",
            "speakers": "Alex, Dr. Smith",
            "messageCount": 2,
            "timestamp": 1_718_000_000_000 + i,
            "messageIds": f"a{i},b{i}",
            "isChunk": True,
        }
        for i in range(3)
    ]
    client.upsert(
        NAME,
        [
            models.PointStruct(id=j, vector=vector(i), payload=p)
            for i, (j, p) in enumerate(zip(ids, payloads, strict=True))
        ],
    )
    return ids


# --- collections ---------------------------------------------------------------------------


def test_missing_collection_reads_as_nothing(store: Store) -> None:
    assert store.collection(NAME) is None
    assert store.query(NAME, QUERY, limit=5, score_threshold=None) == []
    assert list(store.scroll_payloads(NAME)) == []
    assert store.count(NAME) == 0
    assert store.delete_points(NAME, [pid(1)]) == 0


def test_ensure_creates_an_unnamed_cosine_collection_and_records_the_model(
    store: Store, client: QdrantClient
) -> None:
    store.ensure_collection(NAME, size=DIM, model=MODEL)

    info = client.get_collection(NAME)
    assert info.config.params.vectors == models.VectorParams(size=DIM, distance="Cosine")
    assert info.config.metadata == {"memory_pool": {"embedding_model": MODEL, "dimensions": DIM}}
    # BM25 beside it, as a named sparse vector with Qdrant's IDF
    sparse = info.config.params.sparse_vectors or {}
    assert list(sparse) == ["bm25"] and sparse["bm25"].modifier == models.Modifier.IDF
    assert store.collection(NAME) == CollectionState(
        name=NAME, size=DIM, points_count=0, model=MODEL, sparse_names=("bm25",)
    )
    store.ensure_collection(NAME, size=DIM, model=MODEL)  # again: nothing to do, no error


def test_ensure_adopts_an_st_qdrant_memory_collection_and_keeps_its_points(
    store: Store, client: QdrantClient
) -> None:
    ids = st_qdrant_memory_collection(client)
    before = {p.id: p.payload for p in client.scroll(NAME, limit=10)[0]}

    store.ensure_collection(NAME, size=DIM, model=MODEL)

    state = store.collection(NAME)
    assert state is not None
    assert (state.model, state.size, state.points_count) == (MODEL, DIM, 3)
    assert dict(store.scroll_payloads(NAME)) == before
    assert sorted(before) == sorted(ids)


def test_ensure_refuses_another_vector_size(store: Store, client: QdrantClient) -> None:
    st_qdrant_memory_collection(client)
    with pytest.raises(DimensionMismatch, match=rf"{NAME}.* size {DIM}, .* gives 8"):
        store.ensure_collection(NAME, size=8, model=MODEL)
    assert store.collection(NAME).model is None  # a refused collection is left as it was


def test_ensure_refuses_another_recorded_model(store: Store) -> None:
    store.ensure_collection(NAME, size=DIM, model=MODEL)
    with pytest.raises(ModelMismatch, match=rf"{NAME}.*{MODEL}.*all-MiniLM"):
        store.ensure_collection(NAME, size=DIM, model="all-MiniLM-L6-v2")


def test_ensure_refuses_named_vectors(store: Store, client: QdrantClient) -> None:
    params = models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    client.create_collection(NAME, {"dense": params})
    with pytest.raises(DimensionMismatch, match=r"named vectors \(dense\)"):
        store.ensure_collection(NAME, size=DIM, model=MODEL)


class RacingStore(QdrantStore):
    """Sees no collection at first, as a worker does when another creates it meanwhile."""

    raced = False

    def collection(self, name: str) -> CollectionState | None:
        if not self.raced:
            self.raced = True
            return None
        return super().collection(name)


def test_ensure_survives_losing_the_creation_race(client: QdrantClient) -> None:
    QdrantStore(client, local=True).ensure_collection(NAME, size=DIM, model=MODEL)
    late = RacingStore(client, local=True)
    late.ensure_collection(NAME, size=DIM, model=MODEL)
    assert late.raced
    with pytest.raises(ModelMismatch):
        RacingStore(client, local=True).ensure_collection(NAME, size=DIM, model="other")


# --- points --------------------------------------------------------------------------------


def test_upsert_with_the_same_id_overwrites(store: Store) -> None:
    store.ensure_collection(NAME, size=DIM, model=MODEL)
    store.upsert(NAME, [point(1, text="first")])
    store.upsert(NAME, [point(1, text="second")])
    assert store.count(NAME) == 1
    assert [p["text"] for _, p in store.scroll_payloads(NAME)] == ["second"]


def test_query_returns_hits_by_score_with_ids_as_str(filled: Store) -> None:
    hits = filled.query(NAME, QUERY, limit=3, score_threshold=None)
    assert [h.id for h in hits] == [pid(0), pid(1), pid(2)]
    assert [h.score for h in hits] == pytest.approx([score(0), score(1), score(2)])
    assert hits[0].payload["text"] == "chunk 0"
    assert all(isinstance(h.id, str) for h in hits)


def test_query_threshold_limit_and_offset(filled: Store) -> None:
    above = filled.query(NAME, QUERY, limit=10, score_threshold=0.9)
    assert [h.id for h in above] == [pid(i) for i in range(5)]  # score(5) is 0.894
    page = filled.query(NAME, QUERY, limit=3, offset=2, score_threshold=None)
    assert [h.id for h in page] == [pid(2), pid(3), pid(4)]


def test_query_with_a_filter(filled: Store) -> None:
    only = Filter(
        must=(
            MatchAny("messageIdList", ("m2", "m3", "m6", "m7", "m9")),
            Range("timestamp", gte=3_000),
        ),
        must_not=(Match("source", "hermes"),),
    )
    hits = filled.query(NAME, QUERY, limit=10, score_threshold=None, query_filter=only)
    # m2 is too old; m3 and m7 came from hermes
    assert [h.id for h in hits] == [pid(6), pid(9)]


def test_scroll_payloads_pages_through_every_match(store: Store) -> None:
    store.ensure_collection(NAME, size=DIM, model=MODEL)
    store.upsert(NAME, [point(i) for i in range(300)])  # more than one upsert batch
    assert store.count(NAME) == 300

    seen = dict(store.scroll_payloads(NAME, batch=64))
    assert seen.keys() == {pid(i) for i in range(300)}
    assert seen[pid(7)]["text"] == "chunk 7"

    recent = Filter(must=(Range("timestamp", gte=250_000),))
    assert len(list(store.scroll_payloads(NAME, query_filter=recent, batch=16))) == 50
    assert store.count(NAME, recent) == 50


def test_delete_points_reports_how_many_existed(filled: Store) -> None:
    assert filled.delete_points(NAME, [pid(0), pid(1), pid(99)]) == 2
    assert filled.count(NAME) == 10
    assert filled.delete_points(NAME, []) == 0
    assert filled.query(NAME, QUERY, limit=1, score_threshold=None)[0].id == pid(2)


# --- opening and failures ------------------------------------------------------------------


def test_open_without_url_uses_qdrant_edge_under_the_data_dir(tmp_path: Path) -> None:
    store = open_store(Settings(data_dir=tmp_path / "data"))
    try:
        assert isinstance(store, EdgeStore) and store.kind == "embedded" and not store.local
        store.ensure_collection(NAME, size=DIM, model=MODEL)
        assert store.ping()
        # one process at a time: a second store on the same folder is refused
        with pytest.raises(RuntimeError, match="open in another process"):
            open_store(Settings(data_dir=tmp_path / "data"))
    finally:
        store.close()
    assert (tmp_path / "data" / "edge" / NAME).is_dir()
    assert json.loads((tmp_path / "data" / "edge" / f"{NAME}.json").read_text()) == {
        "dimensions": DIM,
        "embedding_model": MODEL,
    }


def test_unreachable_server_is_upstream_unavailable() -> None:
    # nothing listens on port 1; no version check, whose warning would come from a thread
    client = QdrantClient(url="http://127.0.0.1:1", timeout=1, check_compatibility=False)
    store = QdrantStore(client, local=False)
    try:
        assert store.ping() is False
        with pytest.raises(UpstreamUnavailable) as caught:
            store.upsert(NAME, [point(1)])
        assert caught.value.__cause__ is not None
        with pytest.raises(UpstreamUnavailable):
            store.collection(NAME)
    finally:
        store.close()


# --- through the REST API ------------------------------------------------------------------


@pytest.fixture
def server(tmp_path: Path) -> Iterator[QdrantTestServer]:
    with QdrantTestServer(tmp_path / "qdrant") as running:
        yield running


def test_the_http_path_creates_indexes_records_the_model_and_queries(
    server: QdrantTestServer,
) -> None:
    store = open_store(Settings(qdrant_url=server.url, qdrant_timeout_seconds=5))
    try:
        assert store.ping()
        assert store.query(NAME, QUERY, limit=5, score_threshold=None) == []  # a 404 here
        store.ensure_collection(NAME, size=DIM, model=MODEL)
        state = store.collection(NAME)
        assert state is not None
        assert state.model == MODEL  # metadata survives the REST round trip
        assert state.indexed_fields == set(PAYLOAD_INDEXES)

        store.upsert(NAME, [point(i) for i in range(5)])
        hits = store.query(NAME, QUERY, limit=2, score_threshold=0.5)
        assert [h.id for h in hits] == [pid(0), pid(1)]

        store.ensure_collection(NAME, size=DIM, model=MODEL)
        late = RacingStore(store._client, local=False)
        late.ensure_collection(NAME, size=DIM, model=MODEL)  # a 409 on create, then re-read
        with pytest.raises(DimensionMismatch):
            store.ensure_collection(NAME, size=8, model=MODEL)
        assert store.count(NAME) == 5
    finally:
        store.close()


def test_the_http_path_adopts_an_st_qdrant_memory_collection(server: QdrantTestServer) -> None:
    client = QdrantClient(url=server.url, prefer_grpc=False, timeout=5, check_compatibility=False)
    store = QdrantStore(client, local=False)
    try:
        st_qdrant_memory_collection(client)
        store.ensure_collection(NAME, size=DIM, model=MODEL)
        state = store.collection(NAME)
        assert state is not None
        assert (state.model, state.points_count) == (MODEL, 3)
        assert state.indexed_fields == set(PAYLOAD_INDEXES)
    finally:
        store.close()


class OldServer(httpx.BaseTransport):
    """A Qdrant before 1.16 in front of the test server: no collection metadata, refused
    (a 400, as a strict JSON parser does) or dropped (as a lenient one does)."""

    def __init__(self, refuse: bool) -> None:
        self.refuse = refuse
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.read() or b"null")
        if request.method in ("PUT", "PATCH") and isinstance(body, dict) and "metadata" in body:
            if self.refuse:
                error = {"status": {"error": "Format error in JSON body: unknown field `metadata`"}}
                return httpx.Response(400, json=error)
            del body["metadata"]
            request = httpx.Request(request.method, request.url, json=body)
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("refuse", [True, False], ids=["refused", "dropped"])
def test_a_server_without_metadata_gets_the_collection_unrecorded(
    server: QdrantTestServer, refuse: bool, caplog: pytest.LogCaptureFixture
) -> None:
    client = QdrantClient(
        url=server.url,
        prefer_grpc=False,
        timeout=5,
        check_compatibility=False,
        transport=OldServer(refuse),
    )
    store = QdrantStore(client, local=False)
    try:
        store.ensure_collection(NAME, size=DIM, model=MODEL)
        store.ensure_collection(NAME, size=DIM, model=MODEL)
        state = store.collection(NAME)
        assert state is not None
        assert (state.size, state.model) == (DIM, None)
        assert state.indexed_fields == set(PAYLOAD_INDEXES)
        assert "model of mem_dr_smith unrecorded" in caplog.text
        assert ("creating mem_dr_smith without it" in caplog.text) is refuse
    finally:
        store.close()


def test_query_with_a_vector_of_another_size_is_a_dimension_mismatch(filled: Store) -> None:
    with pytest.raises(DimensionMismatch, match=r"'mem_dr_smith' refused a query vector of 3"):
        filled.query(NAME, [1.0, 0.0, 0.0], limit=3, score_threshold=None)


def test_facet_counts_points_per_source(filled: Store) -> None:
    assert filled.facet_counts(NAME, "source") == {"discord": 9, "hermes": 3}
    assert filled.facet_counts("mem_missing", "source") == {}

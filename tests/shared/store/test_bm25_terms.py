"""The BM25 side of the store on both stores (Qdrant Edge and a server): conditional term writes
that never resurrect a deleted point nor overwrite a flush's terms, the language re-backfill;
st-qdrant-memory's collections and an older server, which exist on a server only."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from qdrant_client import QdrantClient, models

from api.recall.lexical import LexicalCollections, hybrid_possible
from api.recall.query_cache import QueryCache
from api.recall.query_filter import RecallFilters
from api.recall.request import RecallRequest
from api.recall.service import recall
from shared.agents import AgentConfig
from shared.embedding.bm25 import document_terms, encoding_of, query_terms
from shared.state import keys
from shared.store import bm25_terms as bm25_store
from shared.store.edge.engine import EdgeStore
from shared.store.interface import CollectionState, PointToWrite, Store
from shared.store.qdrant.engine import QdrantStore
from tests.support.qdrant_server import QdrantTestServer
from tests.support.redis_server import RedisServer
from tests.support.stores import KINDS, open_store
from workers.backfill import backfill
from workers.collections import CollectionGuard

NAME = "mem_lex"
DIM = 8
MODEL = "test-model"


class FixedEmbedder:
    model = MODEL

    def dimensions(self) -> int:
        return DIM


def vec(i: int) -> list[float]:
    return [1.0 if k == i % DIM else 0.1 for k in range(DIM)]


def st_points(n: int) -> list[PointToWrite]:
    """Points as st-qdrant-memory writes them: no terms."""
    return [
        PointToWrite(str(uuid.uuid4()), vec(i), {"text": f"Alex: word{i} and the river"})
        for i in range(n)
    ]


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with open_store(request.param, tmp_path) as opened:
        yield opened


# st-qdrant-memory's own collections exist on a Qdrant server only (it cannot open serve's
# embedded folder): these tests run on the server alone.
ON_A_SERVER = pytest.mark.parametrize("store", ["server"], indirect=True)


def st_collection(store: Store, n: int) -> list[PointToWrite]:
    """Points without BM25 terms. On a server, st-qdrant-memory's collection: one unnamed
    vector, no metadata, then adopted by us; on Edge, points memory-pool holds without terms
    (an export imported without them, a folder migrated from the previous version)."""
    if isinstance(store, QdrantStore):
        store.read(
            NAME,
            lambda c: c.create_collection(NAME, models.VectorParams(size=DIM, distance="Cosine")),
            missing=None,
        )
    else:
        assert isinstance(store, EdgeStore)
        store.create(NAME, size=DIM, model=None)
    points = st_points(n)
    store.upsert(NAME, points)
    return points


def terms_of(store: Store, pid: str) -> tuple[list[int], list[float]] | None:
    [point] = [p for p in store.iter_points(NAME) if p.id == pid]
    return point.sparse


@ON_A_SERVER
def test_an_st_collection_gets_bm25_added_and_keeps_what_st_reads(store: Store) -> None:
    points = st_collection(store, 3)
    store.ensure_collection(NAME, size=DIM, model=MODEL)
    state = store.collection(NAME)
    assert state is not None and state.has_bm25 and state.size == DIM
    info = store.read(NAME, lambda c: c.get_collection(NAME), missing=None)
    assert info.config.params.vectors.size == DIM  # st reads this
    assert bm25_store.lacking_terms(store, NAME) == 3
    # st keeps upserting dense-only points: accepted
    store.bm25.clear()
    store.upsert(NAME, st_points(1))
    assert store.count(NAME) == 4
    assert all(terms_of(store, p.id) is None for p in points)


def test_terms_never_resurrect_a_deleted_point_nor_overwrite_a_flush(store: Store) -> None:
    points = st_collection(store, 4)
    store.ensure_collection(NAME, size=DIM, model=MODEL)
    page, _ = bm25_store.page_lacking_terms(store, NAME, limit=10)
    assert sorted(pid for pid, _ in page) == sorted(p.id for p in points)
    computed = [(pid, document_terms(text)) for pid, text in page]
    # meanwhile: a delete of one point, and a flush rewriting another with its own terms
    store.delete_points(NAME, [points[0].id])
    rewritten = PointToWrite(points[1].id, vec(1), {"text": "Alex: zebra"}, document_terms("zebra"))
    store.upsert(NAME, [rewritten])

    bm25_store.write_missing_terms(store, NAME, computed)

    assert store.count(NAME) == 3  # still deleted
    flushed = terms_of(store, points[1].id)
    assert flushed is not None and flushed[0] == list(document_terms("zebra").indices)
    for point in points[2:]:
        assert terms_of(store, point.id) is not None
    assert bm25_store.lacking_terms(store, NAME) == 0
    # idempotent: again changes nothing
    bm25_store.write_missing_terms(store, NAME, computed)
    assert store.count(NAME) == 3


def test_backfill_is_batched_resumable_and_redone_for_a_new_language(
    store: Store, redis_server: RedisServer
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    st_collection(store, 30)
    guard = CollectionGuard(store, FixedEmbedder(), client)  # type: ignore[arg-type]
    english = AgentConfig(name="lex")
    # a budget of nothing: one batch at most, the rest next time (no cursor kept)
    first = backfill([english], store=store, collections=guard, client=client,
                     budget_seconds=0, batch=8)  # fmt: skip
    assert first.points == 8 and not first.finished
    assert bm25_store.lacking_terms(store, NAME) == 22
    rest = backfill([english], store=store, collections=guard, client=client, batch=8)
    assert rest.points == 22 and rest.finished
    state = store.collection(NAME)
    assert state is not None and state.bm25_encoding == encoding_of("english")
    assert backfill([english], store=store, collections=guard, client=client).points == 0

    french = AgentConfig(name="lex", language="french")
    again = backfill([french], store=store, collections=guard, client=client)
    assert again.dropped == [NAME] and again.points == 30
    state = store.collection(NAME)
    assert state is not None and state.bm25_encoding == encoding_of("french")
    client.close()


def test_an_older_server_stays_dense_and_says_so(tmp_path: Path, redis_server: RedisServer) -> None:
    with QdrantTestServer(tmp_path / "q", before_1_18=True) as server:
        store = QdrantStore(
            QdrantClient(url=server.url, prefer_grpc=False, timeout=5, check_compatibility=False),
            local=False,
        )
        client = redis.Redis.from_url(redis_server.url)
        try:
            points = st_collection(store, 3)
            state = store.ensure_collection(NAME, size=DIM, model=MODEL)
            assert not state.has_bm25 and store.bm25[NAME] is False
            # our writes go on, dense only
            store.upsert(NAME, [PointToWrite(str(uuid.uuid4()), vec(1), {"text": "x"},
                                             document_terms("Alex: x y"))])  # fmt: skip
            assert store.count(NAME) == 4
            guard = CollectionGuard(store, FixedEmbedder(), client)  # type: ignore[arg-type]
            report = backfill([AgentConfig(name="lex")], store=store, collections=guard,
                              client=client)  # fmt: skip
            assert report.points == 0 and terms_of(store, points[0].id) is None
        finally:
            store.close()
            client.close()


@pytest.mark.parametrize(
    ("text", "language"),
    [("Привет, мир! Бегущий", "russian"), ("東京で会いましょう 😀", "japanese"),
     ("", "english"), ("the and of", "english"), ("Ünïcödé naïve café", "klingon")],
)  # fmt: skip
def test_any_text_and_language_gives_terms_without_a_download(text: str, language: str) -> None:
    doc, query = document_terms(text, language), query_terms(text, language)
    assert len(doc.indices) == len(doc.values) and set(query.indices) <= set(doc.indices)
    # query and document share one tokenizer: the same text gives the same terms
    assert set(doc.indices) == set(query.indices)


@pytest.mark.parametrize(
    ("sparse", "points", "local", "possible"),
    [((), 10, False, False), (("bm25",), 10, False, True), (("bm25",), 20_000, True, True),
     (("bm25",), 20_001, True, False), (("bm25",), 10**6, False, True)],
)  # fmt: skip
def test_hybrid_is_possible_with_terms_and_in_local_mode_only_up_to_a_size(
    sparse: tuple[str, ...], points: int, local: bool, possible: bool
) -> None:
    state = CollectionState(NAME, DIM, points, MODEL, sparse_names=sparse)
    assert hybrid_possible(state, local=local) is possible
    assert hybrid_possible(None, local=local) is False


def test_the_query_terms_are_cached_beside_the_embedding_per_language() -> None:
    cache = QueryCache(FixedEmbedder())  # type: ignore[arg-type]
    first = cache.terms("Where did Zephyrine run?", "english")
    assert cache.terms("Where did Zephyrine run?", "english") is first
    assert first == query_terms("Where did Zephyrine run?", "english")
    other = cache.terms("Where did Zephyrine run?", "klingon")  # no stemming: "run" stays
    assert (other is not first and set(other.indices) != set(first.indices)) or other == first


@ON_A_SERVER
def test_a_collection_that_lost_its_bm25_vector_is_recalled_dense(store: Store) -> None:
    """The API believed (cached) the collection had BM25; it was made again without it."""
    st_collection(store, 6)
    lexical = LexicalCollections(store)
    lexical._known[NAME] = 6  # what it read before the collection was made again
    request = RecallRequest("Alex word1 river", frozenset(), 5, -1.0, RecallFilters(), "hybrid")
    found = recall(AgentConfig(name="lex"), request, store=store, cache=QueryCache(
        VectorEmbedder()), lexical=lexical)  # type: ignore[arg-type]  # fmt: skip
    assert len(found.hits) == 5 and all(hit.fused_score is None for hit in found.hits)
    assert lexical.has_bm25(NAME) is False  # forgotten, read again


class VectorEmbedder(FixedEmbedder):
    def embed(self, texts: list[str]) -> list[list[float]]:
        return [vec(1) for _ in texts]


def test_a_finished_collection_is_scanned_again_only_when_its_count_changes(
    store: Store, redis_server: RedisServer
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    points = st_collection(store, 5)
    guard = CollectionGuard(store, FixedEmbedder(), client)  # type: ignore[arg-type]
    agent = AgentConfig(name="lex")
    assert backfill([agent], store=store, collections=guard, client=client).points == 5
    assert client.get(keys.backfilled(NAME)) == b"5"
    # st-qdrant-memory writes one more: the count changed, the next pass finds it
    store.upsert(NAME, st_points(1))
    assert backfill([agent], store=store, collections=guard, client=client).points == 1
    # a delete and a write that keep the count are skipped until the marker expires
    store.delete_points(NAME, [points[0].id])
    store.upsert(NAME, st_points(1))
    assert backfill([agent], store=store, collections=guard, client=client).points == 0
    assert 0 < (client.ttl(keys.backfilled(NAME)) or 0) <= 600
    client.delete(keys.backfilled(NAME))  # expired
    assert backfill([agent], store=store, collections=guard, client=client).points == 1
    assert bm25_store.lacking_terms(store, NAME) == 0
    client.close()


def test_a_writer_that_found_bm25_gone_writes_terms_again_once_it_is_back(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """Two worker processes, each with its own Store. st-qdrant-memory made the collection
    again without BM25 ("Delete All Memories", then its next write): one worker's upsert fell
    back to dense only and remembered that for the life of the process, so after the other
    worker's backfill added the vector back, every chunk it wrote still lacked terms (and a
    rewrite of an open chunk, keeping the point count, was skipped by the backfill)."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    with QdrantTestServer(tmp_path / "q") as server:

        def opened() -> Store:
            http = QdrantClient(url=server.url, prefer_grpc=False, timeout=5,
                                check_compatibility=False)  # fmt: skip
            return QdrantStore(http, local=False, bm25_recheck_seconds=0)

        writer, other = opened(), opened()
        try:
            writer.ensure_collection(NAME, size=DIM, model=MODEL)
            writer.read(NAME, lambda c: c.delete_collection(NAME), missing=None)
            st_collection(other, 2)  # made again by st-qdrant-memory: dense only
            text = "Alex: Zephyrine sang"
            early = PointToWrite(str(uuid.uuid4()), vec(1), {"text": text}, document_terms(text))
            writer.upsert(NAME, [early])  # accepted, dense only
            assert terms_of(writer, early.id) is None

            guard = CollectionGuard(other, FixedEmbedder(), client)  # type: ignore[arg-type]
            backfill([AgentConfig(name="lex")], store=other, collections=guard, client=client)
            assert bm25_store.lacking_terms(other, NAME) == 0

            text = "Alex: Bartholomew danced"
            later = PointToWrite(str(uuid.uuid4()), vec(2), {"text": text}, document_terms(text))
            writer.upsert(NAME, [later])
            assert terms_of(writer, later.id) is not None, "written without its terms"
            # and a rewrite of an existing point keeps it lexically findable
            grown = PointToWrite(early.id, vec(1), {"text": "Alex: Zephyrine sang twice"},
                                 document_terms("Alex: Zephyrine sang twice"))  # fmt: skip
            writer.upsert(NAME, [grown])
            assert terms_of(writer, early.id) is not None
        finally:
            writer.close()
            other.close()
    client.close()


def test_a_long_query_in_local_mode_is_recalled_dense_within_the_sparse_budget() -> None:
    """Local mode scores a sparse query in pure Python at a cost that grows with the query's
    terms too (20,000 points: 1.1 s for 5 terms, 4.3 s for 400, 13 s for 1,000, all under
    the store's one lock): a long Discord message made /retrieve time out and held every
    other recall and flush behind it. Above the budget (points x terms) it is recalled dense;
    a short question on the same collection stays hybrid."""
    store = QdrantStore(QdrantClient(":memory:"), local=True)
    try:
        store.ensure_collection(NAME, size=DIM, model=MODEL)
        words = [f"term{n}word" for n in range(2_000)]
        texts = [" ".join(words[n : n + 60]) for n in range(0, 2_000, 1)]
        store.upsert(NAME, [
            PointToWrite(str(uuid.uuid4()), vec(n), {"text": text}, document_terms(text))
            for n, text in enumerate(texts)
        ])  # fmt: skip
        lexical = LexicalCollections(store)
        cache = QueryCache(VectorEmbedder())  # type: ignore[arg-type]
        agent = AgentConfig(name="lex")

        def hits(query: str) -> list[float | None]:
            request = RecallRequest(query, frozenset(), 5, 0.3, RecallFilters(), "hybrid")
            found = recall(agent, request, store=store, cache=cache, lexical=lexical)
            return [hit.fused_score for hit in found.hits]

        short = " ".join(words[100:110])
        assert hits(short) and all(score is not None for score in hits(short))
        long = " ".join(words[:400])  # ~4,800 characters, 400 terms
        assert hits(long) and all(score is None for score in hits(long))
    finally:
        store.close()

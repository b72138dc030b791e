"""One suite, every Store behaviour memory-pool relies on, run against both implementations:
Qdrant Edge ("edge", serve's embedded engine) and qdrant-client over the REST test server
("server"). Implementation-specific behaviour (st-qdrant-memory's collections on a server,
older servers) stays in test_store.py and test_bm25_store.py."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.embedding.bm25 import document_terms, query_terms
from shared.errors import CollectionMissing, DimensionMismatch, ModelMismatch, StoreRefused
from shared.format.naming import collection_problem
from shared.store import bm25_terms as bm25_store
from shared.store.edge.engine import EdgeStore
from shared.store.edge.tuning import SEGMENT_POINTS, segment_kb
from shared.store.filters import Filter, HasIds, IsEmpty, Match, MatchAny, Range
from shared.store.interface import PAYLOAD_INDEXES, FusedQuery, PointToWrite, Store, StoredPoint
from tests.support.stores import KINDS, open_store
from workers.failures import Action, judge

NAME = "mem_suite"
DIM = 4
MODEL = "text-embedding-3-small"
QUERY = [1.0, 0.0, 0.0, 0.0]


def pid(i: int) -> str:
    return str(uuid.UUID(int=i + 1))


def score(i: int) -> float:
    return 1 / math.sqrt(1 + (i / 10) ** 2)


def point(i: int, *, terms: bool = True, **payload: Any) -> PointToWrite:
    text = f"Alex: chunk {i} about {'rivers' if i % 2 else 'mountains'}"
    base = {"text": text, "timestamp": 1_000 * i, "messageIdList": [f"m{i}"]}
    return PointToWrite(
        id=pid(i),
        vector=[1.0, i / 10, 0.0, 0.0],
        payload=base | payload,
        terms=document_terms(text) if terms else None,
    )


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with open_store(request.param, tmp_path) as opened:
        yield opened


@pytest.fixture
def filled(store: Store) -> Store:
    store.ensure_collection(NAME, size=DIM, model=MODEL)
    store.upsert(NAME, [point(i, source="hermes" if i % 4 == 3 else "discord") for i in range(12)])
    return store


def test_a_new_collection_has_both_vectors_the_model_and_the_indexes(store: Store) -> None:
    assert store.collection(NAME) is None
    state = store.ensure_collection(NAME, size=DIM, model=MODEL)
    assert state.size == DIM and state.model == MODEL and state.has_bm25
    read = store.collection(NAME)
    assert read is not None and read.indexed_fields == set(PAYLOAD_INDEXES)
    assert read.points_count == 0
    again = store.ensure_collection(NAME, size=DIM, model=MODEL)  # idempotent
    assert again.size == DIM


def test_another_size_or_model_is_refused(store: Store) -> None:
    store.ensure_collection(NAME, size=DIM, model=MODEL)
    with pytest.raises(DimensionMismatch):
        store.ensure_collection(NAME, size=8, model=MODEL)
    with pytest.raises(ModelMismatch):
        store.ensure_collection(NAME, size=DIM, model="other-model")


def test_a_query_vector_of_another_size_is_a_dimension_mismatch(filled: Store) -> None:
    """Told apart from other refusals by the store's words (a filter it refuses is not one)."""
    with pytest.raises(DimensionMismatch, match="another embedding model"):
        filled.query(NAME, [*QUERY, 0.0], limit=3, score_threshold=None)


def test_a_missing_collection_reads_as_empty_and_refuses_writes(store: Store) -> None:
    assert store.query(NAME, QUERY, limit=3, score_threshold=None) == []
    assert store.count(NAME) == 0
    assert list(store.scroll_payloads(NAME)) == []
    assert store.point(NAME, pid(1)) is None
    assert store.delete_points(NAME, [pid(1)]) == 0
    assert store.facet_counts(NAME, "source") == {}
    assert list(store.iter_points(NAME)) == []
    with pytest.raises(CollectionMissing):
        store.upsert(NAME, [point(1)])


def test_query_by_score_threshold_offset_and_filter(filled: Store) -> None:
    hits = filled.query(NAME, QUERY, limit=3, score_threshold=None)
    assert [h.id for h in hits] == [pid(0), pid(1), pid(2)]
    assert [h.score for h in hits] == pytest.approx([score(0), score(1), score(2)], rel=1e-4)
    assert hits[0].payload["text"].startswith("Alex: chunk 0")
    above = filled.query(NAME, QUERY, limit=10, score_threshold=0.9)
    assert [h.id for h in above] == [pid(i) for i in range(5)]
    page = filled.query(NAME, QUERY, limit=3, offset=2, score_threshold=None)
    assert [h.id for h in page] == [pid(2), pid(3), pid(4)]
    listed = MatchAny("messageIdList", ("m2", "m3", "m6", "m7", "m9"))
    only = Filter(
        must=(listed, Range("timestamp", gte=3_000)), must_not=(Match("source", "hermes"),)
    )
    found = filled.query(NAME, QUERY, limit=10, score_threshold=None, query_filter=only)
    assert [h.id for h in found] == [pid(6), pid(9)]


def test_the_plugins_exclusions_leave_out_listed_chunks(filled: Store) -> None:
    excluded = tuple(f"m{i}" for i in range(0, 12, 2)) + tuple(f"x{i}" for i in range(24))
    flt = Filter(must_not=(MatchAny("messageIdList", excluded),))
    hits = filled.query(NAME, QUERY, limit=10, score_threshold=None, query_filter=flt)
    assert [h.id for h in hits] == [pid(i) for i in range(1, 12, 2)]


def test_upsert_overwrites_and_delete_reports_what_existed(filled: Store) -> None:
    filled.upsert(NAME, [point(1, text="second")])
    assert filled.count(NAME) == 12
    assert filled.point(NAME, pid(1))["text"] == "second"  # type: ignore[index]
    assert filled.delete_points(NAME, [pid(0), pid(1), pid(99)]) == 2
    assert filled.count(NAME) == 10
    assert filled.delete_points(NAME, []) == 0
    assert filled.query(NAME, QUERY, limit=1, score_threshold=None)[0].id == pid(2)


def test_scroll_count_and_facets(store: Store) -> None:
    store.ensure_collection(NAME, size=DIM, model=MODEL)
    store.upsert(NAME, [point(i, source="a" if i < 200 else "b") for i in range(300)])
    seen = dict(store.scroll_payloads(NAME, batch=64))
    assert seen.keys() == {pid(i) for i in range(300)}
    recent = Filter(must=(Range("timestamp", gte=250_000),))
    assert len(list(store.scroll_payloads(NAME, query_filter=recent, batch=16))) == 50
    assert store.count(NAME, recent) == 50
    assert store.count(NAME, Filter(must=(HasIds((pid(1), pid(2), pid(999))),))) == 2
    assert store.count(NAME, Filter(must=(IsEmpty("userIdList"),))) == 300
    assert store.facet_counts(NAME, "source") == {"a": 200, "b": 100}
    only_text = dict(store.scroll_payloads(NAME, batch=500, fields=("text",)))
    assert set(only_text[pid(3)]) == {"text"}


def test_fused_query_and_cosines(filled: Store) -> None:
    terms = query_terms("rivers", "english")
    for fusion in ("dbsf", "rrf"):
        fused = filled.fused_query(NAME, FusedQuery(
            QUERY, terms, prefetch=4, score_threshold=None,
            query_filter=None, lexical_threshold=0.0, fusion=fusion,
        ))  # fmt: skip
        ids = [p.id for p in fused]
        assert pid(0) in ids  # the best dense
        assert any(pid(i) in ids for i in (5, 7, 9, 11))  # rivers, far down the dense order
    cosines = filled.cosines(NAME, [pid(0), pid(3), pid(99)], QUERY)
    assert cosines.keys() == {pid(0), pid(3)}
    assert cosines[pid(3)] == pytest.approx(score(3), rel=1e-4)


def test_bm25_backfill_writes_only_where_terms_are_missing(store: Store) -> None:
    store.ensure_collection(NAME, size=DIM, model=MODEL)
    store.upsert(NAME, [point(i, terms=i >= 3) for i in range(6)])
    assert bm25_store.lacking_terms(store, NAME) == 3
    page, _ = bm25_store.page_lacking_terms(store, NAME, limit=10)
    assert sorted(p for p, _ in page) == [pid(0), pid(1), pid(2)]
    assert all(text.startswith("Alex: chunk") for _, text in page)
    store.delete_points(NAME, [pid(2)])
    computed = [(p, document_terms(text)) for p, text in page]
    bm25_store.write_missing_terms(store, NAME, computed)  # pid(2) is gone: stays gone
    assert bm25_store.lacking_terms(store, NAME) == 0
    assert store.count(NAME) == 5
    bm25_store.drop_terms(store, NAME)
    assert bm25_store.lacking_terms(store, NAME) == 5
    bm25_store.record_encoding(store, NAME, "english-v1")
    state = store.collection(NAME)
    assert state is not None and state.bm25_encoding == "english-v1" and state.model == MODEL


def test_newest_page_orders_by_timestamp(filled: Store) -> None:
    page, cursor = filled.newest_page(NAME, [Match("source", "discord")], limit=3, after=None)
    assert [p for p, _ in page] == [pid(10), pid(9), pid(8)] and cursor is not None
    rest, _ = filled.newest_page(NAME, [Match("source", "discord")], limit=3, after=cursor)
    assert [p for p, _ in rest] == [pid(6), pid(5), pid(4)]


def test_iter_points_and_write_points_round_trip(filled: Store, tmp_path: Path) -> None:
    points = list(filled.iter_points(NAME, page=5))
    assert [p.id for p in points] == sorted(pid(i) for i in range(12))
    first = points[0]
    assert first.vector is not None and len(first.vector) == DIM and first.sparse is not None
    with open_store("edge", tmp_path / "copy") as target:
        target.ensure_collection(NAME, size=DIM, model=MODEL)
        target.write_points(NAME, points)
        copied = list(target.iter_points(NAME))
    assert [(p.id, p.payload) for p in copied] == [(p.id, p.payload) for p in points]
    for a, b in zip(copied, points, strict=True):  # Edge keeps float32
        assert a.vector == pytest.approx(b.vector, rel=1e-6)
        assert a.sparse is not None and b.sparse is not None and a.sparse[0] == b.sparse[0]
        assert a.sparse[1] == pytest.approx(b.sparse[1], rel=1e-6)
    bare = list(filled.iter_points(NAME, with_vectors=False))
    assert all(p.vector is None and p.sparse is None for p in bare)
    assert isinstance(bare[0], StoredPoint)


def test_an_edge_shard_keeps_everything_across_a_restart(tmp_path: Path) -> None:
    first = EdgeStore(tmp_path / "edge")
    first.ensure_collection(NAME, size=DIM, model=MODEL)
    first.upsert(NAME, [point(i) for i in range(20)])
    first.record_encoding(NAME, "english-v1")
    first.optimize(NAME)
    first.upsert(NAME, [point(20)])  # after the optimize, in the write-ahead log only
    first.close()
    again = EdgeStore(tmp_path / "edge")
    try:
        state = again.collection(NAME)
        assert state is not None
        assert (state.points_count, state.model, state.size) == (21, MODEL, DIM)
        assert state.bm25_encoding == "english-v1"
        assert state.indexed_fields == set(PAYLOAD_INDEXES)
        assert again.query(NAME, QUERY, limit=1, score_threshold=None)[0].id == pid(0)
        assert again.point(NAME, pid(20)) is not None
    finally:
        again.close()


def test_a_name_no_collection_can_have_reads_as_missing(store: Store) -> None:
    name = "mem_" + "b" * 1020  # an agent name over the limit, as /health may be asked about
    assert store.collection(name) is None
    assert store.count(name) == 0


@pytest.mark.parametrize("by_writer", [True, False])
def test_an_edge_bulk_write_is_indexed_a_segment_at_a_time_by_its_writer(
    tmp_path: Path, by_writer: bool
) -> None:
    """Edge's optimize holds the GIL for its whole run and indexes everything pending: a bulk
    write (an import of thousands of points) left to the background optimizer made one run of
    many segments, seconds in which serve answered nothing. The writer indexes each segment's
    worth as it goes, so no more than about one segment is ever left for a single run."""
    dims = 384
    per_segment = SEGMENT_POINTS
    store = EdgeStore(tmp_path / "edge", optimize_in_background=False, optimize_by_writer=by_writer)
    try:
        store.ensure_collection(NAME, size=dims, model=MODEL)
        points = [
            StoredPoint(pid(i), {"text": f"chunk {i}"}, [1.0] + [(i % 97) / 97] * (dims - 1), None)
            for i in range(4 * per_segment + 10)
        ]
        store.write_points(NAME, points)
        handle = store.shards.open[NAME].handle
        info = handle.info()
        assert info.points_count == len(points)
        if by_writer:
            assert info.segments_count >= 4 and info.indexed_vectors_count >= 3 * per_segment
            assert store.shards.open[NAME].unindexed < SEGMENT_POINTS
        else:  # the baseline: everything waits for one long run
            assert info.indexed_vectors_count == 0
    finally:
        store.close()


def test_a_write_the_store_refuses_for_its_content_is_told_apart(store: Store) -> None:
    """A vector of the wrong size reaching the store (the collection check passed, the point
    is broken) is refused for good: the flush quarantines it at once instead of retrying it
    twice as an unforeseen error (Edge raised a bare Exception)."""
    store.ensure_collection(NAME, size=DIM, model=MODEL)
    broken = PointToWrite(pid(1), [1.0, 0.0, 0.0], {"text": "three numbers"}, None)
    with pytest.raises(StoreRefused, match="dimension"):
        store.upsert(NAME, [broken])
    assert store.count(NAME) == 0
    assert judge(StoreRefused("x")).action is Action.QUARANTINE


def test_collection_names_lists_every_collection(store: Store) -> None:
    assert NAME not in store.collection_names()
    store.ensure_collection(NAME, size=DIM, model=MODEL)
    store.ensure_collection("mem_other", size=DIM, model=MODEL)
    names = store.collection_names()
    assert {NAME, "mem_other"} <= set(names) and names == sorted(names)


@pytest.mark.parametrize("dims", [4, 384, 1536, 3072])
def test_an_edge_segment_holds_the_same_points_whatever_the_vector_size(dims: int) -> None:
    """An optimize's cost is per point (the payload indexes), and a process can map ~400
    segments in all: sized in KB of vectors, a 3,072-dimension collection was cut into 83-point
    segments and 50k chunks of it ran out of memory maps ("Cannot allocate memory")."""
    points = segment_kb(dims) * 1024 // (4 * dims)
    assert abs(points - SEGMENT_POINTS) <= SEGMENT_POINTS // 50  # KB rounding


# Names a Qdrant server takes (shared.format.naming.collection_problem passes them) that are no
# plain folder name: an agents file may set any of them as an agent's `collection`.
SERVER_NAMES = [
    "Aria memories",
    "café-rêves",
    "bad name!",
    "..hidden",
    "a" * 255,
    "migrated-from-local-mode",  # the migration's own marker file in the edge folder
]


@pytest.mark.parametrize("name", SERVER_NAMES)
def test_every_name_a_server_takes_is_a_collection(store: Store, name: str) -> None:
    """The embedded engine refused these with a ValueError (a 500 from an import, a flush that
    could never write): it must take every name a Qdrant server takes."""
    assert collection_problem(name) is None
    state = store.ensure_collection(name, size=DIM, model=MODEL)
    assert state.name == name and state.size == DIM
    store.upsert(name, [point(i) for i in range(3)])
    assert [h.id for h in store.query(name, QUERY, limit=1, score_threshold=None)] == [pid(0)]
    assert name in store.collection_names()
    assert store.count(name) == 3


def test_collections_of_unusual_names_survive_a_restart(tmp_path: Path) -> None:
    first = EdgeStore(tmp_path / "edge")
    for name in SERVER_NAMES:
        first.ensure_collection(name, size=DIM, model=MODEL)
        first.upsert(name, [point(1)])
    first.close()
    again = EdgeStore(tmp_path / "edge")
    try:
        assert set(again.collection_names()) == set(SERVER_NAMES)
        assert all(again.count(name) == 1 for name in SERVER_NAMES)
    finally:
        again.close()

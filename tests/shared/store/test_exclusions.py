"""Excluded message ids, left out by the store, on both stores: the hits are those of the
same search with the excluded chunks dropped afterwards, and those of excluding the chunks by
point id; on Qdrant Edge (which excludes by point id, exclusions.py) also those of its own
keyword filter, dense and fused."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import qdrant_edge as edge

from api.recall.query_filter import RecallFilters, recall_filter
from api.recall.rules import is_excluded
from shared.embedding.bm25 import document_terms, query_terms
from shared.store.edge import exclusions
from shared.store.edge.engine import EdgeStore
from shared.store.edge.filters import to_edge
from shared.store.edge.tuning import RESCORED, SEGMENT_POINTS
from shared.store.filters import Filter, HasIds
from shared.store.interface import FusedPoint, FusedQuery, PointToWrite, Store
from tests.support.stores import KINDS, open_store

NAME = "mem_excluded"
DIM = 16
POINTS = 2 * SEGMENT_POINTS + 100  # several segments on Edge, some indexed, one not
WORDS = ["harbour", "whale", "lantern", "river", "storm", "bread", "violin", "cliff"]


def _vectors(count: int) -> np.ndarray:
    vectors = np.random.default_rng(5).standard_normal((count, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    return _vectors(POINTS)


def fill(store: Store, vectors: np.ndarray) -> None:
    rng = random.Random(3)
    store.ensure_collection(NAME, size=DIM, model="text-embedding-3-small")
    points = []
    for i, vector in enumerate(vectors):
        words = " ".join(rng.choice(WORDS) for _ in range(6))
        text = f"[2024-06-10]\nAlex: {words} {i}"
        payload = {"text": text, "messageIdList": [f"m{i}a", f"m{i}b"]}
        points.append(
            PointToWrite(str(uuid.UUID(int=i + 1)), vector.tolist(), payload, document_terms(text))
        )
    store.upsert(NAME, points)
    if isinstance(store, EdgeStore):
        store.optimize(NAME)


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path, vectors: np.ndarray) -> Iterator[Store]:
    with open_store(request.param, tmp_path) as opened:
        fill(opened, vectors)
        yield opened


@pytest.fixture
def edge_store(tmp_path: Path, vectors: np.ndarray) -> Iterator[EdgeStore]:
    with open_store("edge", tmp_path) as opened:
        assert isinstance(opened, EdgeStore)
        fill(opened, vectors)
        yield opened


def asks(vectors: np.ndarray) -> Iterator[list[float]]:
    """Questions near a stored chunk: the Discord plugin excludes the conversation the
    question is in, which is what it is most like."""
    noise = np.random.default_rng(9)
    for n in (0, 17, 404, 1111):
        near = vectors[n] + 0.3 * noise.standard_normal(DIM).astype(np.float32)
        yield (near / np.linalg.norm(near)).tolist()


def excluded_of(store: Store, vector: list[float]) -> tuple[frozenset[str], tuple[str, ...]]:
    """One message of each of the 30 best chunks, and those chunks."""
    best = store.query(NAME, vector, limit=30, score_threshold=None)
    ids = frozenset(h.payload["messageIdList"][k % 2] for k, h in enumerate(best))
    return ids, tuple(h.id for h in best)


def test_excluded_chunks_are_those_dropped_afterwards(store: Store, vectors: np.ndarray) -> None:
    for vector in asks(vectors):
        excluded, best = excluded_of(store, vector)
        flt = recall_filter(RecallFilters(), excluded)
        hits = store.query(NAME, vector, limit=20, score_threshold=None, query_filter=flt)
        everything = store.query(NAME, vector, limit=80, score_threshold=None)
        kept = [h for h in everything if not is_excluded(h.payload, set(excluded))][:20]
        assert [h.id for h in hits] == [h.id for h in kept]
        assert [h.score for h in hits] == pytest.approx([h.score for h in kept])
        assert not set(best) & {h.id for h in hits}


def test_excluding_by_message_id_or_by_point_id_is_the_same(
    store: Store, vectors: np.ndarray
) -> None:
    for vector in asks(vectors):
        excluded, best = excluded_of(store, vector)
        by_message = recall_filter(RecallFilters(), excluded)
        by_point = Filter(must_not=(HasIds(best),))
        for fusion in ("dbsf", "rrf"):
            ask = FusedQuery(vector, query_terms("the whale and the lantern"), 20, None,
                             by_message, 0.0, fusion)  # fmt: skip
            fused = store.fused_query(NAME, ask)
            by_id = FusedQuery(**{**_fields(ask), "query_filter": by_point})  # type: ignore[arg-type]
            # the whole fusion (at most both legs' 20): equal scores may come in any order
            again = store.fused_query(NAME, by_id)
            assert _scores(fused) == pytest.approx(_scores(again), rel=1e-5)
            assert fused and not set(best) & {p.id for p in fused}


def _scores(points: list[FusedPoint]) -> dict[str, float]:
    return {p.id: p.fused_score for p in points}


def _fields(ask: FusedQuery) -> dict[str, object]:
    return {name: getattr(ask, name) for name in FusedQuery.__dataclass_fields__}


def test_edge_hits_are_those_of_its_keyword_filter(
    edge_store: EdgeStore, vectors: np.ndarray
) -> None:
    for vector in asks(vectors):
        excluded, _ = excluded_of(edge_store, vector)
        flt = recall_filter(RecallFilters(), excluded)
        hits = edge_store.query(NAME, vector, limit=20, score_threshold=0.0, query_filter=flt)
        request = edge.QueryRequest(
            limit=20, query=edge.Query.Nearest(vector), filter=to_edge(flt), score_threshold=0.0,
            with_payload=True, params=RESCORED,
        )  # fmt: skip
        raw = edge_store.shards.call(NAME, lambda s, r=request: s.query(r), missing=[])
        assert [(h.id, h.score) for h in hits] == [(str(p.id), p.score) for p in raw]


def test_edge_keeps_the_keyword_filter_when_many_points_hold_the_ids(
    edge_store: EdgeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    many = recall_filter(RecallFilters(), [f"m{i}a" for i in range(40)])
    none = recall_filter(RecallFilters(), ["never-stored"])
    shard = edge_store.shards.get(NAME)
    assert shard is not None and many is not None
    held = exclusions.by_point_ids(shard.handle, many)
    assert held is not None and len(held.must_not) == 1
    assert isinstance(held.must_not[0], HasIds) and len(held.must_not[0].ids) == 40
    monkeypatch.setattr(exclusions, "MOST_POINTS", 39)
    assert exclusions.by_point_ids(shard.handle, many) == many
    assert exclusions.by_point_ids(shard.handle, none) == Filter()
    assert edge_store.query(NAME, [1.0] * DIM, limit=5, score_threshold=None,
                            query_filter=none)  # fmt: skip

"""Fusion weights on both stores (Qdrant Edge and the REST test server): memory-pool's weighted
DBSF of the two legs agrees with the store's own DBSF at weight 1, a larger weight ranks lexical
matches higher, and RRF takes the weight in the store."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from shared.embedding.bm25 import document_terms, query_terms
from shared.store.filters import Filter, Range
from shared.store.fusion import LegPoint, weighted_dbsf
from shared.store.interface import FusedPoint, FusedQuery, PointToWrite, Store
from tests.support.stores import KINDS, open_store

NAME = "mem_weights"
QUERY = [1.0, 0.0, 0.0, 0.0]
# every third chunk names the otter, more or less often, among more or less filler
OTTERS = [i for i in range(30) if i % 3 == 0]


def pid(i: int) -> str:
    return f"00000000-0000-0000-0000-{i + 1:012d}"


def point(i: int) -> PointToWrite:
    named = "otter " * (1 + i % 5) if i in OTTERS else ""
    text = f"Alex: {named}chunk {i} {'filler ' * (i % 7)}"
    return PointToWrite(
        pid(i), [1.0, i / 8, (i % 3) / 5, 0.0], {"text": text, "timestamp": i}, document_terms(text)
    )


@pytest.fixture(params=KINDS, scope="module")
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    with open_store(request.param, tmp_path_factory.mktemp(request.param)) as opened:
        opened.ensure_collection(NAME, size=4, model="m")
        opened.upsert(NAME, [point(i) for i in range(30)])
        yield opened


def ask(**changes: object) -> FusedQuery:
    base = FusedQuery(QUERY, query_terms("otter", "english"), prefetch=6, score_threshold=None,
                      query_filter=None, lexical_threshold=0.0, fusion="dbsf")  # fmt: skip
    return replace(base, **changes)  # type: ignore[arg-type]


def ids(points: list[FusedPoint]) -> list[str]:
    return [p.id for p in points]


@pytest.mark.parametrize(
    "query",
    [
        ask(),
        ask(prefetch=10, score_threshold=0.5, lexical_threshold=1.0),
        ask(query_filter=Filter(must=(Range("timestamp", gte=4),))),
    ],
    ids=["plain", "thresholds", "filter"],
)
def test_fused_here_at_weight_one_agrees_with_the_stores_dbsf(
    store: Store, query: FusedQuery
) -> None:
    native = store.fused_in_store(NAME, query)
    here = weighted_dbsf(*store.fusion_legs(NAME, query), 1.0)
    assert len(native) > query.prefetch  # both legs brought points of their own
    assert [p.id for p in here] == ids(native)
    assert [p.score for p in here] == pytest.approx([p.fused_score for p in native], rel=1e-4)
    assert [p.payload for p in here] == [p.payload for p in native]


def test_fused_here_carries_the_dense_cosine(store: Store) -> None:
    fused = store.fused_query(NAME, ask(lexical_weight=2.0))
    known = {p.id: p.cosine for p in fused if p.cosine is not None}
    assert len(known) == 6  # the dense leg's prefetch
    exact = store.cosines(NAME, list(known), QUERY)
    assert known == pytest.approx(exact, abs=1e-6)
    # the store's own fusion (weight 1) knows no cosine: the caller reads it
    assert all(p.cosine is None for p in store.fused_query(NAME, ask()))


@pytest.mark.parametrize("fusion", ["dbsf", "rrf"])
def test_a_larger_weight_ranks_lexical_matches_higher(store: Store, fusion: str) -> None:
    def lexical_ranks(weight: float) -> list[int]:
        fused = ids(store.fused_query(NAME, ask(fusion=fusion, lexical_weight=weight)))
        return [fused.index(pid(i)) for i in OTTERS if pid(i) in fused]

    equal, double, tenfold = lexical_ranks(1.0), lexical_ranks(2.0), lexical_ranks(10.0)
    assert sum(double) < sum(equal) and sum(tenfold) < sum(double)
    assert len(equal) == len(double) == len(tenfold)  # the same candidates, reordered
    # at 10 the lexical leg leads: the top is all otters
    assert set(ids(store.fused_query(NAME, ask(fusion=fusion, lexical_weight=10.0)))[:6]) <= {
        pid(i) for i in OTTERS
    }


@pytest.mark.parametrize("fusion", ["dbsf", "rrf"])
def test_weight_zero_keeps_the_dense_order(store: Store, fusion: str) -> None:
    fused = ids(store.fused_query(NAME, ask(fusion=fusion, lexical_weight=0.0)))
    dense = [hit.id for hit in store.query(NAME, QUERY, limit=6, score_threshold=None)]
    assert fused[:6] == dense
    assert len(fused) > 6  # lexical-only points stay candidates, after the dense ones


def qdrant_rrf(legs: tuple[list[LegPoint], list[LegPoint]], weights: tuple[float, float]) -> dict:
    """Qdrant's weighted RRF of the legs (the server's and Edge's): a point at position `pos`
    (from 0) of a leg of weight w adds 1 / ((pos + 1) / w + k - 1), with Qdrant's k = 60."""
    scores: dict[str, float] = {}
    for leg, weight in zip(legs, weights, strict=True):
        for pos, point in enumerate(leg):
            scores[point.id] = scores.get(point.id, 0.0) + 1 / ((pos + 1) / weight + 60 - 1)
    return scores


@pytest.mark.parametrize("weight", [1.0, 2.0])
def test_rrf_is_qdrants_with_its_constant_of_60(store: Store, weight: float) -> None:
    """The REST test server stands for a Qdrant server: its RRF (qdrant-client's local mode,
    whose own constant is 2) scores as the server and Edge do, or a test of an order on it
    would pass where a real server ranks otherwise."""
    query = ask(fusion="rrf", lexical_weight=weight)
    fused = store.fused_in_store(NAME, query)
    expected = qdrant_rrf(store.fusion_legs(NAME, query), (1.0, weight))
    assert len(fused) > query.prefetch
    assert {p.id: p.fused_score for p in fused} == pytest.approx(
        {p.id: expected[p.id] for p in fused}, rel=1e-4
    )
    scores = [p.fused_score for p in fused]
    assert scores == sorted(scores, reverse=True)
    left_out = [score for i, score in expected.items() if i not in ids(fused)]
    assert max(left_out, default=0.0) <= scores[-1] * (1 + 1e-4)  # the best, ties aside

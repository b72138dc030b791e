"""Weighted DBSF as memory-pool computes it (shared/store/fusion.py): Qdrant's normalisation,
then dense + w x lexical, in parameter tables."""

from __future__ import annotations

import pytest

from shared.store.fusion import LegPoint, normalised, weighted_dbsf


def leg(*scored: tuple[str, float]) -> list[LegPoint]:
    return [LegPoint(pid, score, {"text": pid}) for pid, score in scored]


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([], []),
        ([0.8], [0.5]),  # one point: Qdrant's 0.5
        ([0.4, 0.4, 0.4], [0.5, 0.5, 0.5]),  # no spread: 0.5 each
        # mean 2, sample standard deviation 1: the range [2 - 3, 2 + 3]
        ([3.0, 2.0, 1.0], [4 / 6, 3 / 6, 2 / 6]),
        # unclamped, as Qdrant's: 11 scores, one far out, lands above 1
        ([10.0] + [0.0] * 10, [1.00252] + [0.44975] * 10),
    ],
)
def test_normalised_as_qdrants_dbsf(scores: list[float], expected: list[float]) -> None:
    assert normalised(scores) == pytest.approx(expected, abs=1e-5)


DENSE = leg(("a", 0.9), ("b", 0.8), ("c", 0.5))
LEXICAL = leg(("c", 12.0), ("d", 9.0), ("a", 6.0))


@pytest.mark.parametrize(
    ("weight", "order"),
    [
        (1.0, ["c", "a", "b", "d"]),  # b, found by the dense leg alone, above d
        (2.0, ["c", "a", "d", "b"]),  # d, found by the lexical leg alone, above b
        (0.0, ["a", "b", "c", "d"]),  # the dense order; lexical-only last
        (10.0, ["c", "d", "a", "b"]),  # the lexical order; dense-only last
    ],
)
def test_the_weight_moves_lexical_matches_up(weight: float, order: list[str]) -> None:
    fused = weighted_dbsf(DENSE, LEXICAL, weight)
    assert [p.id for p in fused] == order
    by_id = {p.id: p for p in fused}
    dense, lexical = normalised([0.9, 0.8, 0.5]), normalised([12.0, 9.0, 6.0])
    assert by_id["a"].score == pytest.approx(dense[0] + weight * lexical[2])
    assert by_id["d"].score == pytest.approx(weight * lexical[1])  # absent from dense: adds 0
    # the cosine of what the dense leg found, none for a lexical-only point
    assert (by_id["a"].cosine, by_id["c"].cosine, by_id["d"].cosine) == (0.9, 0.5, None)
    assert by_id["d"].payload == {"text": "d"}


def test_ties_keep_the_dense_order_then_the_lexical_one() -> None:
    fused = weighted_dbsf(leg(("x", 0.5), ("y", 0.5)), leg(("z", 3.0), ("w", 3.0)), 1.0)
    assert [p.id for p in fused] == ["x", "y", "z", "w"]  # all 0.5


def test_an_empty_leg_fuses_the_other_alone() -> None:
    assert [p.id for p in weighted_dbsf([], LEXICAL, 2.0)] == ["c", "d", "a"]
    assert [p.id for p in weighted_dbsf(DENSE, [], 2.0)] == ["a", "b", "c"]
    assert weighted_dbsf([], [], 1.0) == []

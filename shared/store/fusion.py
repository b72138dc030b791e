"""Weighted DBSF of the two legs' scored points, computed in memory-pool: Qdrant's own arithmetic
(each leg's scores normalised over mean +- 3 sample standard deviations, unclamped; a leg of one
point, or of equal scores, gives 0.5), then dense + w x lexical. Neither Qdrant 1.20 nor Edge
0.9 weighs DBSF's legs (weights exist for RRF only), so the stores fuse there themselves and
memory-pool does it here when the weight is not 1. Pure: no I/O."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

# Qdrant's RRF constant: what a server and Edge use for `{"fusion": "rrf"}` when a query names
# none (Edge is given it; the REST test server sets local mode's, 2, to it).
RRF_K = 60


@dataclass(frozen=True, slots=True)
class LegPoint:
    """One point as a leg (a prefetch) scored it: the cosine, or the BM25 score."""

    id: str
    score: float
    payload: dict = field(compare=False)


@dataclass(frozen=True, slots=True)
class Fused:
    """A point of the fusion: its fused score, and its cosine when the dense leg found it."""

    id: str
    score: float
    payload: dict = field(compare=False)
    cosine: float | None


def normalised(scores: Sequence[float]) -> list[float]:
    """Qdrant's DBSF normalisation (segment/src/common/score_fusion.rs, distr_norm)."""
    if len(scores) < 2:
        return [0.5] * len(scores)
    # Welford's one pass, as Qdrant: equal scores give exactly no spread
    mean = aggregate = 0.0
    for count, score in enumerate(scores, start=1):
        delta = score - mean
        mean += delta / count
        aggregate += delta * (score - mean)
    spread = 6 * math.sqrt(aggregate / (len(scores) - 1))
    if spread == 0:
        return [0.5] * len(scores)
    low = mean - spread / 2
    return [(s - low) / spread for s in scores]


def weighted_dbsf(
    dense: Sequence[LegPoint], lexical: Sequence[LegPoint], weight: float
) -> list[Fused]:
    """Both legs fused, best first: a point absent from a leg adds nothing for it. Ties keep
    the dense leg's order, then the lexical leg's (Qdrant leaves them unordered)."""
    scores: dict[str, float] = {}
    points: dict[str, LegPoint] = {}
    for point, norm in zip(dense, normalised([p.score for p in dense]), strict=True):
        scores[point.id] = norm
        points[point.id] = point
    for point, norm in zip(lexical, normalised([p.score for p in lexical]), strict=True):
        scores[point.id] = scores.get(point.id, 0.0) + weight * norm
        points.setdefault(point.id, point)
    cosines = {p.id: p.score for p in dense}
    # dicts keep insertion order and sorted() is stable: equal scores stay in leg order
    ordered = sorted(scores, key=lambda pid: -scores[pid])
    return [Fused(pid, scores[pid], points[pid].payload, cosines.get(pid)) for pid in ordered]

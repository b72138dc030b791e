"""Excluded message ids as the ids of the points holding them, for a search on Qdrant Edge.

Edge's segments are small and searched by a plain scan, which checks a `must_not` on
messageIdList's keyword index against every point it reads: with the Discord plugin's 30
exclusions 50k x 384 took 24 ms instead of 4 (BENCHMARKS.md, "import with terms, exclusions near
the top"). The index finds the few points holding those ids in about a millisecond, and leaving
them out by id costs a hash lookup a point: the same points are left out, so the hits are the
same, at about the cost of no exclusion.
"""

from __future__ import annotations

import qdrant_edge as edge

from shared.format.fields import MESSAGE_ID_LIST
from shared.store.edge.filters import condition
from shared.store.filters import Condition, Filter, HasIds, MatchAny

# More points than this hold the excluded ids: the keyword filter is kept as it is (a search
# excluding thousands of points by id gains nothing worth a scroll of them first).
MOST_POINTS = 1024


def by_point_ids(shard: edge.EdgeShard, flt: Filter | None) -> Filter | None:
    """`flt` with its exclusions of message ids turned into exclusions of the points holding
    them now. A point written between this and the search is not left out by it: a recall
    checks every hit against its excluded ids anyway (api/recall/rules.py)."""
    if flt is None:
        return None
    excluded = [c for c in flt.must_not if _message_ids(c)]
    if not excluded:
        return flt
    holding = edge.Filter(should=[condition(c) for c in excluded])
    request = edge.ScrollRequest(
        limit=MOST_POINTS + 1, filter=holding, with_payload=False, with_vector=False
    )
    records, _ = shard.scroll(request)
    if len(records) > MOST_POINTS:
        return flt
    rest = tuple(c for c in flt.must_not if not _message_ids(c))
    ids = tuple(str(r.id) for r in records)
    return Filter(must=flt.must, must_not=rest + ((HasIds(ids),) if ids else ()))


def _message_ids(c: Condition) -> bool:
    return isinstance(c, MatchAny) and c.field == MESSAGE_ID_LIST

"""Which message ids an agent's collection already holds, whoever wrote them (for imports)."""

from __future__ import annotations

from collections.abc import Collection

from qdrant_client import models

from shared.recall_rules import message_ids_of
from shared.store import Store

LACKING_ID_LIST = models.Filter(
    must=[models.IsEmptyCondition(is_empty=models.PayloadField(key="messageIdList"))]
)


def known_ids(store: Store, collection: str, wanted: Collection[str]) -> set[str]:
    """memory-pool's points are found by their keyword-indexed `messageIdList`;
    st-qdrant-memory's only have the comma-joined `messageIds`, so those are read and parsed."""
    wanted = set(wanted)
    if not wanted:
        return set()
    found: set[str] = set()
    listed = models.Filter(
        must=[models.FieldCondition(key="messageIdList", match=models.MatchAny(any=sorted(wanted)))]
    )
    for query_filter in (listed, LACKING_ID_LIST):
        for _, payload in store.scroll_payloads(collection, query_filter=query_filter):
            found |= message_ids_of(payload) & wanted
    return found

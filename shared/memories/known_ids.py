"""Which message ids an agent's collection already holds, whoever wrote them (for imports)."""

from __future__ import annotations

from collections.abc import Collection

from shared.format.fields import MESSAGE_ID_LIST
from shared.format.payload import message_ids_of
from shared.store.filters import Filter, IsEmpty, MatchAny
from shared.store.interface import Store

LACKING_ID_LIST = Filter(must=(IsEmpty(MESSAGE_ID_LIST),))


def known_ids(store: Store, collection: str, wanted: Collection[str]) -> set[str]:
    """memory-pool's points are found by their keyword-indexed `messageIdList`;
    st-qdrant-memory's only have the comma-joined `messageIds`, so those are read and parsed."""
    wanted = set(wanted)
    if not wanted:
        return set()
    found: set[str] = set()
    listed = Filter(must=(MatchAny(MESSAGE_ID_LIST, tuple(sorted(wanted))),))
    for query_filter in (listed, LACKING_ID_LIST):
        for _, payload in store.scroll_payloads(collection, query_filter=query_filter):
            found |= message_ids_of(payload) & wanted
    return found

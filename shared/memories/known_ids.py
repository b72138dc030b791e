"""Which message ids an agent's collection already holds, whoever wrote them (for imports)."""

from __future__ import annotations

from collections.abc import Collection

from shared.format.fields import MESSAGE_ID_LIST, SOURCE
from shared.format.payload import message_ids_of, messages_of
from shared.store.filters import Filter, IsEmpty, Match, MatchAny
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


def holding(store: Store, collection: str, source: str, message_id: str) -> str | None:
    """Whether a written chunk holds the message: "rebuildable" (memory-pool's, with its
    messages), "stale" (one that cannot be rebuilt: older, or st-qdrant-memory's), or None."""
    if store.collection(collection) is None:
        return None
    mine = Filter(must=(MatchAny(MESSAGE_ID_LIST, (message_id,)), Match(SOURCE, source)))
    found = list(store.scroll_payloads(collection, query_filter=mine))
    if any(messages_of(payload) is not None for _, payload in found):
        return "rebuildable"
    if found:
        return "stale"
    # st-qdrant-memory's points have no source: any of them holding the id holds this message
    for _, payload in store.scroll_payloads(collection, query_filter=LACKING_ID_LIST):
        if message_id in message_ids_of(payload):
            return "stale"
    return None

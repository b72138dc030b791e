"""Which message ids an agent's collection already holds, whoever wrote them (for imports), and
what a chunk that keeps its messages holds for each (to tell an edited message from a re-send)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.format.fields import MESSAGE_ID_LIST, SOURCE
from shared.format.fingerprint import text_fingerprint
from shared.format.payload import message_ids_of, messages_of
from shared.store.filters import Filter, IsEmpty, Match, MatchAny
from shared.store.interface import Store

LACKING_ID_LIST = Filter(must=(IsEmpty(MESSAGE_ID_LIST),))


@dataclass
class KnownMessages:
    ids: set[str] = field(default_factory=set)
    # id -> text_fingerprint of its stored text, for ids in the source's rebuildable chunks
    fingerprints: dict[str, str] = field(default_factory=dict)


def _fingerprints(payload: Mapping[str, Any], wanted: set[str]) -> dict[str, str]:
    messages = messages_of(payload) or []
    return {m.id: text_fingerprint(m.text) for m in messages if m.id in wanted}


def known_messages(
    store: Store, collection: str, wanted: Collection[str], source: str | None = None
) -> KnownMessages:
    """memory-pool's points are found by their keyword-indexed `messageIdList`;
    st-qdrant-memory's only have the comma-joined `messageIds`, so those are read and parsed.
    With a source, each id held by that source's chunks that keep their messages
    (`chunkMessages`) gets the fingerprint of the text stored for it."""
    wanted = set(wanted)
    known = KnownMessages()
    if not wanted:
        return known
    listed = Filter(must=(MatchAny(MESSAGE_ID_LIST, tuple(sorted(wanted))),))
    for query_filter in (listed, LACKING_ID_LIST):
        for _, payload in store.scroll_payloads(collection, query_filter=query_filter):
            known.ids |= message_ids_of(payload) & wanted
            if source is not None and payload.get(SOURCE) == source:
                known.fingerprints.update(_fingerprints(payload, wanted))
    return known


def known_ids(store: Store, collection: str, wanted: Collection[str]) -> set[str]:
    """The ids of `wanted` that any point of the collection holds."""
    return known_messages(store, collection, wanted).ids


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

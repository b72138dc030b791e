"""Which message ids an agent's collection already holds, whoever wrote them (for imports), and
what a chunk that keeps its messages holds for each (to tell an edited message from a re-send)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.format.fields import MESSAGE_ID_LIST, SOURCE
from shared.format.fingerprint import text_fingerprint
from shared.format.payload import ChunkContext, context_of, message_ids_of, messages_of
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


@dataclass(frozen=True, slots=True)
class Held:
    """A written chunk holding a message. One that can be rebuilt (memory-pool's, with its
    messages) says where its conversation happened and the fingerprint of the message's
    stored text; one that cannot (older, or st-qdrant-memory's) says neither."""

    context: ChunkContext | None = None
    fingerprint: str | None = None


def holding(store: Store, collection: str, source: str, message_id: str) -> Held | None:
    """The written chunk that holds the message, or None."""
    if store.collection(collection) is None:
        return None
    mine = Filter(must=(MatchAny(MESSAGE_ID_LIST, (message_id,)), Match(SOURCE, source)))
    found = list(store.scroll_payloads(collection, query_filter=mine))
    for _, payload in found:
        prints = _fingerprints(payload, {message_id})
        if message_id in prints:
            return Held(context_of(payload), prints[message_id])
    if found:
        return Held()
    # st-qdrant-memory's points have no source: any of them holding the id holds this message
    for _, payload in store.scroll_payloads(collection, query_filter=LACKING_ID_LIST):
        if message_id in message_ids_of(payload):
            return Held()
    return None

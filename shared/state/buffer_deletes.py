"""Deleting buffered messages: what a delete takes out of Redis, and the tombstones it leaves."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import redis

from shared.state import keys
from shared.state.conversation_meta import Field
from shared.state.scripts import SOURCES, named
from shared.state.text import as_text

# (conversation, message id) of a removed buffered message; the id is None for a record no
# flush could read (it has no id to tombstone, but it is removed all the same).
Removed = tuple[str, str | None]

# Removes a conversation's matching buffered messages in one step and bumps its generation, so
# a flush already in flight sees the change before it commits (and takes its points back).
# Their chunk-mates stay: a written open chunk that held one is deleted by the caller and
# written anew from what is left (it is `open` in the result).
_FORGET = SOURCES["forget"]
_INVALIDATE = SOURCES["invalidate"]
# Messages an edit took out of their chunks wait in the agent's emptied hash, in no chunk and
# no buffer: a delete takes those of its scope out and tombstones them in one step.
_FORGET_EMPTIED = SOURCES["forget_emptied"]


@dataclass
class Forgotten:
    """What a delete took out of the buffers, and the stored points that are copies of what is
    still buffered (the open chunks it touched, the points of unfinished flushes): those are
    deleted, never rewritten, as the next flush writes them again from the buffer."""

    removed: list[Removed] = field(default_factory=list)
    # (conversation, the first message of its written open chunk, messages left in its buffer)
    open: list[tuple[str, str, int]] = field(default_factory=list)
    inflight: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class BufferScope:
    """Which buffered messages of the chosen conversations go: all, these ids, or this user's."""

    mode: str  # "all" | "ids" | "user"
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class EmptiedScope:
    """Which emptied messages of an agent a delete takes: these ids (any source), this user's,
    a source's, or one conversation's (its key)."""

    mode: str  # "ids" | "user" | "source" | "conversation"
    values: tuple[str, ...] = ()
    source: str = ""
    conversation: str = ""


class BufferDeletes:
    def __init__(self, client: redis.Redis) -> None:
        self.redis = client
        self._forget = client.register_script(_FORGET)
        self._invalidate = client.register_script(_INVALIDATE)
        self._forget_emptied = client.register_script(_FORGET_EMPTIED)

    def forget(self, conversations: Iterable[str], scope: BufferScope, now_ms: int) -> Forgotten:
        """Remove matching buffered messages from each conversation; returns what was removed."""
        found = Forgotten()
        for conversation in conversations:
            removed, first, inflight, left = self._forget(
                keys=self._keys(conversation),
                args=[scope.mode, conversation, now_ms, *scope.values],
            )
            found.removed.extend((conversation, _message_id(raw)) for raw in removed)
            if first:
                found.open.append((conversation, as_text(first), int(left)))
            if inflight:
                found.inflight.extend(json.loads(inflight))
        return found

    def invalidate(self, conversations: Iterable[str], now_ms: int) -> None:
        """The stored open chunks of these conversations were deleted: nothing of their buffers
        counts as written (a flush that wrote one meanwhile takes it back), each is due again."""
        for conversation in conversations:
            self._invalidate(keys=self._keys(conversation), args=[conversation, now_ms])

    def forget_emptied(self, collection: str, scope: EmptiedScope) -> int:
        """Tombstone the emptied messages in scope (an edit back would store them again);
        returns how many."""
        args = {"mode": scope.mode, "values": list(scope.values),
                "source": keys.part(scope.source), "conversation": scope.conversation,
                "seen_prefix": keys.seen_prefix(collection)}  # fmt: skip
        return len(self._forget_emptied(keys=[keys.emptied(collection)], args=[named(args)]))

    def keyed_by_id_in_channel(self, conversations: Sequence[str], channel_id: str) -> list[str]:
        """Of `conversations`, those keyed by a conversation id whose messages came in channel
        `channel_id` (the first one's: its chunks carry it); a channel's delete reaches them."""
        pipe = self.redis.pipeline(transaction=False)
        for conversation in conversations:
            pipe.hmget(keys.meta(conversation), [Field.CID, Field.CHANNEL])
        found = []
        for conversation, (cid, channel) in zip(conversations, pipe.execute(), strict=True):
            if cid and channel is not None and as_text(channel) == channel_id:
                found.append(conversation)
        return found

    @staticmethod
    def _keys(conversation: str) -> list[str]:
        return [keys.meta(conversation), keys.buffer(conversation), keys.DUE, keys.QUARANTINE]

    def tombstone(
        self, collection: str, ids_by_source: Iterable[tuple[str, Iterable[str]]]
    ) -> None:
        """Deleted ids are never stored again: their dedupe markers lose their expiry."""
        pipe = self.redis.pipeline(transaction=False)
        for source, message_ids in ids_by_source:
            for message_id in message_ids:
                pipe.set(keys.seen(collection, source, message_id), keys.TOMBSTONE)
        pipe.execute()


def _message_id(raw: bytes | str) -> str | None:
    """The id of a removed record, read leniently: a record missing its time or its text
    (older code wrote some) is still a message whose id a re-send must not store again."""
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    found = record.get("i") if isinstance(record, dict) else None
    return found if isinstance(found, str) else None

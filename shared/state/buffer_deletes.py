"""Deleting buffered messages: what a delete takes out of Redis, and the tombstones it leaves."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import redis

from shared.state import keys
from shared.state.scripts import SOURCES

# (conversation, message id) of a removed buffered message; the id is None for a record no
# flush could read (it has no id to tombstone, but it is removed all the same).
Removed = tuple[str, str | None]

# Removes a conversation's matching buffered messages in one step and bumps its generation, so
# a flush already in flight sees the change before it commits (and takes its points back).
# A match inside the open chunk that is already written drops that whole chunk, as its point
# is deleted with it: "every chunk that holds it".
_FORGET = SOURCES["forget"]


@dataclass(frozen=True, slots=True)
class BufferScope:
    """Which buffered messages of the chosen conversations go: all, these ids, or this user's."""

    mode: str  # "all" | "ids" | "user"
    values: tuple[str, ...] = ()


class BufferDeletes:
    def __init__(self, client: redis.Redis) -> None:
        self.redis = client
        self._forget = client.register_script(_FORGET)

    def forget(
        self, conversations: Iterable[str], scope: BufferScope, now_ms: int
    ) -> list[Removed]:
        """Remove matching buffered messages from each conversation; returns what was removed."""
        removed: list[Removed] = []
        for conversation in conversations:
            result = self._forget(
                keys=[
                    keys.meta(conversation),
                    keys.buffer(conversation),
                    keys.DUE,
                    keys.QUARANTINE,
                ],
                args=[scope.mode, conversation, now_ms, *scope.values],
            )
            removed.extend((conversation, _message_id(raw)) for raw in result)
        return removed

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

"""Edits of written chunks waiting for a worker (the save script queues them): read them,
mark them done, bring emptied messages back. The rewrite itself is workers/edits.py."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote

import redis

from shared.state import keys
from shared.state.scripts import SOURCES, named
from shared.state.text import as_text


@dataclass(frozen=True, slots=True)
class PendingEdit:
    """The newest stored JSON of one message whose written chunk must take its new text."""

    source: str
    message_id: str
    line: str

    @property
    def field(self) -> str:
        return keys.edit_field(self.source, self.message_id)


def _pending(field: str, line: str) -> PendingEdit | None:
    source, sep, message_id = field.partition(":")
    if not sep:
        return None
    return PendingEdit(unquote(source), unquote(message_id), line)


class PendingEdits:
    def __init__(self, client: redis.Redis) -> None:
        self.redis = client
        self._done = client.register_script(SOURCES["edit_done"])
        self._restore = client.register_script(SOURCES["edit_restore"])
        self._sweep = client.register_script(SOURCES["emptied_sweep"])

    def collections(self) -> list[str]:
        """The collections with edits waiting."""
        return sorted(as_text(member) for member in self.redis.smembers(keys.EDITS_DUE))

    def pending(self, collection: str) -> list[PendingEdit]:
        raw = self.redis.hgetall(keys.edits(collection))
        found = (_pending(as_text(k), as_text(v)) for k, v in raw.items())
        return sorted((e for e in found if e is not None), key=lambda e: e.field)

    def done(
        self,
        collection: str,
        applied: list[PendingEdit],
        emptied: Mapping[str, str] | None = None,
    ) -> int:
        """These edits are in their chunks (each leaves unless a newer one replaced it);
        `emptied` (field -> the record before) are the messages the rewrite took out.
        Returns how many edits still wait."""
        args = {"collection": collection, "done": {e.field: e.line for e in applied},
                "emptied": dict(emptied or {})}  # fmt: skip
        script_keys = [keys.edits(collection), keys.EDITS_DUE, keys.emptied(collection)]
        return int(self._done(keys=script_keys, args=[named(args)]))

    def keep_emptied(self, collection: str, emptied: Mapping[str, str]) -> None:
        """Keep the records of the messages a rewrite is about to take out (field -> the
        record before), before their chunks lose them: a worker that dies between the rewrite
        and `done` must not take their only copy with it."""
        if emptied:
            pairs = [item for pair in emptied.items() for item in pair]
            self.redis.hset(keys.emptied(collection), items=pairs)

    def restore(self, collection: str, edit: PendingEdit, *, idle_seconds: float,
                min_chars: int) -> bool:  # fmt: skip
        """Bring an emptied message back into its conversation with the edit's text."""
        args = {"field": edit.field, "line": edit.line, "now": int(time.time() * 1000),
                "meta_prefix": keys.meta(""), "buf_prefix": keys.buffer(""),
                "idle_ms": int(idle_seconds * 1000), "min_chars": min_chars}  # fmt: skip
        script_keys = [keys.edits(collection), keys.emptied(collection),
                       keys.seen(collection, edit.source, edit.message_id), keys.DUE,
                       keys.QUARANTINE]  # fmt: skip
        return int(self._restore(keys=script_keys, args=[named(args)])) == 1

    def sweep_emptied(self, page: int = 256) -> int:
        """Forget every emptied record whose dedupe mark has expired (nothing can bring it back
        any more, and it holds a message's text); returns how many went. Agent by agent, from
        the names hash (a message is stored, naming its agent, before an edit can empty it): a
        SCAN for the hashes would walk every dedupe mark in Redis on each sweep."""
        gone = 0
        for raw_collection in self.redis.hkeys(keys.NAMES):
            collection = as_text(raw_collection)
            key, prefix = keys.emptied(collection), keys.seen_prefix(collection)
            fields: list[str] = []
            for field, _ in self.redis.hscan_iter(key, count=page):  # NOVALUES: Redis 7.4
                fields.append(as_text(field))
                if len(fields) == page:
                    gone += int(self._sweep(keys=[key], args=[prefix, *fields]))
                    fields = []
            if fields:
                gone += int(self._sweep(keys=[key], args=[prefix, *fields]))
        return gone

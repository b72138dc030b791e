"""The quarantine: conversations whose flush failed for a reason retrying cannot fix.

A quarantined conversation leaves the due set, so it never holds back a flush again; its
messages stay in its buffer (new ones still join it, deduplicated as ever) until an operator
releases it, after a fix. State: `mp:quarantine` (conversation -> since, Unix ms) and fields
on the conversation's meta hash (`quarantined` the reason, `quarantined_at`, `failures`).
Entering it needs the conversation's lease, like every other change a flush makes.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Iterable
from dataclasses import dataclass

import redis

from shared.state import keys
from shared.state.buffers import Claim
from shared.state.conversation_meta import Field
from shared.state.conversations import collection_of, source_of
from shared.state.scripts import SOURCES, named
from shared.state.text import as_text

_FAIL = SOURCES["quarantine_fail"]

# Released conversations are due at once; what still fails returns to the quarantine.
_RELEASE = SOURCES["quarantine_release"]

# Leaving the quarantine without a flush: its messages were discarded by an operator.
_DROP = SOURCES["quarantine_drop"]


class FailOutcome(enum.Enum):
    """What counting a failed flush did (quarantine_fail.lua's answer)."""

    LEASE_LOST = 0  # another worker has the conversation: nothing changed
    RETRIED = 1  # given back, tried again later
    QUARANTINED = 2  # set aside at the threshold
    CHANGED = 3  # a delete changed it while it failed (maybe removing the culprit): due now,
    # the failure not counted


@dataclass(frozen=True, slots=True)
class QuarantineEntry:
    """One quarantined conversation, as /health, stats and the listing show it."""

    conversation: str
    collection: str
    agent: str
    source: str
    reason: str
    since: int
    messages: int
    failures: int


class Quarantine:
    """Entering, listing and releasing the quarantine in Redis."""

    def __init__(self, client: redis.Redis) -> None:
        self.redis = client
        self._fail = client.register_script(_FAIL)
        self._release = client.register_script(_RELEASE)
        self._drop = client.register_script(_DROP)

    def fail(self, claim: Claim, reason: str, *, threshold: int, retry_in: float,
             generation: str = "") -> FailOutcome:  # fmt: skip
        """Count a failure of a claimed conversation: quarantine it at `threshold` failures in
        a row (1: at once), else give it back to be tried in `retry_in` seconds. With the
        `generation` the flush read, a conversation a delete changed meanwhile is not counted."""
        conversation = claim.conversation
        script_keys = [keys.lease(conversation), keys.meta(conversation), keys.DUE]
        args = named({"token": claim.token, "now": _now_ms(), "member": conversation,
                      "reason": reason[:1000], "threshold": threshold,
                      "retry_ms": int(retry_in * 1000), "generation": generation})  # fmt: skip
        return FailOutcome(int(self._fail(keys=[*script_keys, keys.QUARANTINE], args=[args])))

    def members(self, collection: str | None = None) -> list[tuple[str, int]]:
        """(conversation, since) of every quarantined conversation, oldest first."""
        found: list[tuple[bytes, float]] = self.redis.zrange(  # type: ignore[assignment]
            keys.QUARANTINE, 0, -1, withscores=True
        )  # redis-py types zrange as a list of members whatever `withscores` says
        pairs = [(as_text(member), int(since)) for member, since in found]
        if collection is None:
            return pairs
        return [(member, since) for member, since in pairs if collection_of(member) == collection]

    def count(self) -> int:
        return int(self.redis.zcard(keys.QUARANTINE))

    def counts_by_collection(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for member, _ in self.members():
            collection = collection_of(member)
            counts[collection] = counts.get(collection, 0) + 1
        return counts

    def entries(self, members: Iterable[tuple[str, int]]) -> list[QuarantineEntry]:
        """What each quarantined conversation holds and why, read in one round trip."""
        members = list(members)
        pipe = self.redis.pipeline(transaction=False)
        for member, _ in members:
            pipe.hmget(keys.meta(member), Field.QUARANTINED, Field.FAILURES, Field.AGENT)
            pipe.llen(keys.buffer(member))
        pipe.hgetall(keys.NAMES)
        replies = pipe.execute()
        names = {as_text(k): as_text(v) for k, v in replies[-1].items()}
        entries = []
        for (member, since), (fields, length) in zip(
            members, zip(replies[:-1:2], replies[1:-1:2], strict=True), strict=True
        ):
            reason, failures, agent = (as_text(v) if v is not None else None for v in fields)
            collection = collection_of(member)
            entries.append(
                QuarantineEntry(
                    conversation=member,
                    collection=collection,
                    agent=names.get(collection) or agent or collection,
                    source=source_of(member),
                    reason=reason or "",
                    since=since,
                    messages=int(length),
                    failures=int(failures or 0),
                )
            )
        return entries

    def release(self, conversations: Iterable[str]) -> int:
        """Let these conversations be flushed again now; returns how many were quarantined."""
        members = list(conversations)
        if not members:
            return 0
        args: list[str | int] = [_now_ms(), keys.meta(""), *members]
        return int(self._release(keys=[keys.QUARANTINE, keys.DUE], args=args))

    def is_quarantined(self, conversation: str) -> bool:
        return self.redis.zscore(keys.QUARANTINE, conversation) is not None

    def drop(self, conversation: str) -> bool:
        """Take a conversation out without trying it again (its messages were discarded)."""
        return int(self._drop(keys=[keys.QUARANTINE, keys.meta(conversation)],
                              args=[conversation])) == 1  # fmt: skip


def _now_ms() -> int:
    return int(time.time() * 1000)

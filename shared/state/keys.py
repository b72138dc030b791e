"""Every Redis key memory-pool uses, named in one place."""

from __future__ import annotations

from functools import lru_cache
from urllib.parse import quote

PREFIX = "mp:"

DUE = f"{PREFIX}due"  # ZSET conversation -> Unix ms when it next needs a flush
DEAD_LETTERS = f"{PREFIX}dead"  # LIST of JSON dead letters, oldest first
REPLAY = f"{PREFIX}replay"  # LIST of dead letters queued for another try
REPLAY_LOCK = f"{PREFIX}replay:lock"  # one replay at a time
# ZSET conversation -> Unix ms since when it is quarantined: a flush failed for a reason
# retrying cannot fix; its messages wait in its buffer for a release (shared/state/quarantine.py)
QUARANTINE = f"{PREFIX}quarantine"
NAMES = f"{PREFIX}names"  # HASH collection -> the agent's canonical name (first spelling seen)
SCHEMA = f"{PREFIX}schema"  # the layout version of everything under PREFIX (shared/redis_upgrade)
UPGRADE_LOCK = f"{PREFIX}upgrade:lock"  # one process upgrades the layout at a time
# Before layout 2: SET of agent names as clients spelled them (read only by the upgrade).
LEGACY_AGENTS = f"{PREFIX}agents"


def part(value: str) -> str:
    """One key component; ':' and '%' are escaped so components can never run together."""
    if value.isascii() and value.isalnum():
        return value  # snowflakes and most ids: quote() would return them unchanged, slower
    return _quoted(value)


@lru_cache(maxsize=4096)
def _quoted(value: str) -> str:
    # the same few collection, source and channel names come in every /save, for each of
    # its messages; bounded, so a stream of unique ids only cycles it
    return quote(value, safe="")


def agent_key(collection: str) -> str:
    """An agent is its collection: every spelling of a name that reaches one collection shares
    one dedupe, buffers, tombstones and stats (keyed by name, they could overwrite, read and
    resurrect each other's memories)."""
    return part(collection)


# A deleted id's dedupe marker, a tombstone: this value and no expiry, so it is never stored
# again (a seen id's marker holds its conversation and expires).
TOMBSTONE = "deleted"


def seen(collection: str, source: str, message_id: str) -> str:
    """Dedupe marker of one message id: with an expiry when seen, without one when deleted."""
    return f"{seen_prefix(collection)}{part(source)}:{part(message_id)}"


def seen_prefix(collection: str) -> str:
    """What every dedupe marker of an agent starts with (its keys are safe in a SCAN pattern:
    part() escapes every glob character)."""
    return f"{PREFIX}seen:{agent_key(collection)}:"


def buffer(conversation: str) -> str:
    """LIST of a conversation's messages not yet in a stored closed chunk, in arrival order."""
    return f"{PREFIX}buf:{conversation}"


def meta(conversation: str) -> str:
    """HASH of a conversation's state: where it is, generation, what of it is written."""
    return f"{PREFIX}conv:{conversation}"


def lease(conversation: str) -> str:
    """A worker's lease on a conversation; it expires if the worker dies."""
    return f"{PREFIX}lease:{conversation}"


def conversations(collection: str) -> str:
    """SET of an agent's conversations (for flush-all, stats and deletes)."""
    return f"{PREFIX}convs:{agent_key(collection)}"


def blocked(collection: str) -> str:
    """Why an agent's writes are held (collection of another size or model); absent when fine."""
    return f"{PREFIX}blocked:{agent_key(collection)}"


def agent_stats(collection: str) -> str:
    """HASH of per-agent counters such as the last write time."""
    return f"{PREFIX}stats:{agent_key(collection)}"


def backfilled(collection: str) -> str:
    """The point count of a collection when the BM25 backfill last found nothing left to do."""
    return f"{PREFIX}bm25done:{agent_key(collection)}"


def bm25_refused(collection: str) -> str:
    """Set for a while when the Qdrant server refused to add the BM25 vector (older than 1.18),
    so the backfill does not ask again every round."""
    return f"{PREFIX}bm25refused:{agent_key(collection)}"


# Set while a backfill task waits in the queue, so busy workers never get a pile of them.
BACKFILL_QUEUED = f"{PREFIX}backfill:queued"


# --- edits (shared/state/edits.py) ----------------------------------------------------------
# SET of the collections with edits waiting for a worker (their chunks are already written).
EDITS_DUE = f"{PREFIX}edits:due"


def edit_field(source: str, message_id: str) -> str:
    """A message's field in an agent's edit and emptied hashes."""
    return f"{part(source)}:{part(message_id)}"


def edits(collection: str) -> str:
    """HASH edit_field -> the newest stored JSON of a message whose written chunk must be
    rewritten with its new text (the last edit wins)."""
    return f"{PREFIX}edits:{agent_key(collection)}"


def emptied(collection: str) -> str:
    """HASH edit_field -> the stored JSON a message had when an edit to a too-short text took it
    out of its chunk: an edit back to a long text brings it back with its speaker and time."""
    return f"{PREFIX}emptied:{agent_key(collection)}"


def rewrites_lock(collection: str) -> str:
    """One rewrite of an agent's written chunks at a time (edits, deletes): each reads a point,
    changes it and writes it back."""
    return f"{PREFIX}rewrite:lock:{agent_key(collection)}"


def edits_queued(collection: str) -> str:
    """Set while an edit task for the agent waits in the queue (or backs off after a failure)."""
    return f"{PREFIX}edits:queued:{agent_key(collection)}"

"""Writing stored chunks again after an edit or a delete: each keeps its point id, and gets its
new text, dense vector and BM25 terms in one upsert; a chunk left with no message is deleted.

Edits (workers/edits.py) and deletes (shared/memories/deletes.py) both read a point, change it
and write it back, so both hold the agent's rewrite lock (`rewrites_held`) while they do."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import redis

from shared.embedding.bm25 import document_terms
from shared.embedding.embedder import Embedder
from shared.errors import InputRejected
from shared.format import fields
from shared.format.messages import Message
from shared.format.naming import point_id
from shared.format.payload import chunk_payload, context_of
from shared.format.rewrite import Rewrite
from shared.ops import metrics
from shared.state import keys
from shared.state.lock import held
from shared.store.interface import PointToWrite, Store

log = logging.getLogger(__name__)

REWRITE_LOCK_MS = 120_000


@dataclass(frozen=True, slots=True)
class ChunkChange:
    """One stored chunk and what it becomes."""

    point_id: str
    payload: Mapping[str, Any]
    before: Sequence[Message]
    rewrite: Rewrite


@dataclass
class RewriteResult:
    rewritten: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    # the embedding provider refused the new text for good: the point keeps its old one
    refused: list[str] = field(default_factory=list)


def target_id(collection: str, change: ChunkChange) -> str:
    """The chunk keeps its point id, unless the message that id came from left it: then it
    takes its first remaining message's. A point's id always comes from a message it holds,
    so a message that comes back later (a new chunk, its id from that message) never lands on
    the point of the chunk it left."""
    source = str(change.payload.get(fields.SOURCE, ""))
    kept = {message.id for message in change.rewrite.messages}
    gone = [m.id for m in change.before if m.id not in kept]
    if change.point_id not in {point_id(collection, source, mid) for mid in gone}:
        return change.point_id
    return point_id(collection, source, change.rewrite.messages[0].id)


@contextmanager
def rewrites_held(client: redis.Redis, collection: str, wait_seconds: float) -> Iterator[bool]:
    """The agent's rewrite lock, waited for up to `wait_seconds` (yields whether it is held)."""
    key = keys.rewrites_lock(collection)
    with held(client, key, ttl_ms=REWRITE_LOCK_MS, wait_seconds=wait_seconds) as got:
        yield got


def rewrite_chunks(
    store: Store,
    embedder: Embedder,
    collection: str,
    changes: Sequence[ChunkChange],
    *,
    language: str,
    reason: str,
) -> RewriteResult:
    """Write each changed chunk again under its own point id (st-qdrant-memory reads it as
    before: the same fields, from the messages it still holds); delete the emptied ones.
    Raises UpstreamUnavailable when the provider or the store is down (nothing is half done
    that a retry would not finish: each upsert is whole)."""
    result = RewriteResult()
    kept = [change for change in changes if not change.rewrite.empty]
    result.deleted = [change.point_id for change in changes if change.rewrite.empty]
    payloads = [
        chunk_payload(change.rewrite.messages, context_of(change.payload)) for change in kept
    ]
    vectors = embedder.embed([payload["text"] for payload in payloads]) if kept else []
    points = []
    for change, payload, vector in zip(kept, payloads, vectors, strict=True):
        if isinstance(vector, InputRejected):
            log.error("a rewritten chunk of %s was refused by the embedding provider: %s",
                      collection, vector)  # fmt: skip
            result.refused.append(change.point_id)
            continue
        terms = document_terms(payload["text"], language)
        target = target_id(collection, change)
        if target != change.point_id:
            result.deleted.append(change.point_id)  # after the upsert: never neither
        points.append(PointToWrite(target, vector, payload, terms))
    if points:
        store.upsert(collection, points)
    if result.deleted:
        store.delete_points(collection, result.deleted)
    result.rewritten = [point.id for point in points]
    metrics.record_rewrites(reason, len(points) + len(result.deleted))
    return result

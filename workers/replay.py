"""Replays dead letters: embed each refused chunk again and upsert it to its own point id."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import redis

from shared.agents import Agents
from shared.embedding.bm25 import DEFAULT_LANGUAGE, document_terms
from shared.embedding.embedder import Embedder
from shared.errors import (
    DimensionMismatch,
    InputRejected,
    MemoryPoolError,
    ModelMismatch,
    UpstreamUnavailable,
)
from shared.format import fields
from shared.state import keys
from shared.state.dead_letters import DeadLetter, DeadLetters
from shared.state.lock import held
from shared.store.interface import PointToWrite, Store
from workers.collections import CollectionGuard

log = logging.getLogger(__name__)

BATCH = 64


@dataclass
class ReplayReport:
    stored: int = 0
    refused: int = 0
    dropped: int = 0


def _deleted_since(client: redis.Redis, collection: str, payload: dict) -> bool:
    """A message deleted after its chunk was dead-lettered must not come back through replay."""
    source = str(payload.get("source", ""))
    ids = payload.get(fields.MESSAGE_ID_LIST) or []
    pipe = client.pipeline(transaction=False)
    for message_id in ids:
        pipe.ttl(keys.seen(collection, source, str(message_id)))
    return any(ttl == -1 for ttl in pipe.execute())  # a tombstone has no expiry


def _language(agents: Agents, letter: DeadLetter) -> str:
    """The BM25 language of the letter's agent, as its flush would have used."""
    try:
        return agents.get(letter.agent).language
    except MemoryPoolError:  # no longer accepted: its collection's terms are made by default
        return DEFAULT_LANGUAGE


def _write(
    live: list[tuple[bytes, DeadLetter]],
    *,
    agents: Agents,
    dead: DeadLetters,
    embedder: Embedder,
    store: Store,
    collections: CollectionGuard,
    report: ReplayReport,
) -> None:
    for _, letter in live:
        collections.ensure(letter.collection)
    vectors = embedder.embed([str(letter.payload[fields.TEXT]) for _, letter in live])
    for (raw, letter), vector in zip(live, vectors, strict=True):
        if isinstance(vector, InputRejected):
            dead.refused_again(raw, letter, str(vector))
            report.refused += 1
            continue
        # both vectors in one upsert, as a flush writes them: a dense-only rewrite of an
        # existing point would drop its terms without changing the count the backfill watches
        text = str(letter.payload[fields.TEXT])
        terms = document_terms(text, _language(agents, letter))
        point = PointToWrite(letter.point_id, vector, letter.payload, terms=terms)
        store.upsert(letter.collection, [point])
        dead.done(raw)
        report.stored += 1


def replay(
    *,
    client: redis.Redis,
    agents: Agents,
    dead: DeadLetters,
    embedder: Embedder,
    store: Store,
    collections: CollectionGuard,
    lease: float,
) -> ReplayReport:
    """Replay one batch under a lock; point ids are fixed, so a repeated replay is harmless."""
    report = ReplayReport()
    with held(client, keys.REPLAY_LOCK, ttl_ms=int(lease * 1000)) as got:
        if not got:
            return report
        entries = dead.peek_replays(BATCH)
        live = []
        for raw, letter in entries:
            if _deleted_since(client, letter.collection, letter.payload):
                dead.done(raw)
                report.dropped += 1
            else:
                live.append((raw, letter))
        try:
            _write(live, agents=agents, dead=dead, embedder=embedder, store=store,
                   collections=collections, report=report)  # fmt: skip
        except (UpstreamUnavailable, DimensionMismatch, ModelMismatch) as exc:
            # Left on the replay queue; the scheduler asks again shortly.
            log.warning("dead-letter replay waits: %s", exc)
        return report

"""The data folder of the previous version (qdrant-client's local mode in `<data_dir>/qdrant`)
copied into Qdrant Edge shards on serve's first start: every point with its vectors and payload,
checked by count, and with BM25 terms of its agent's language (so no backfill follows). The old
folder is kept until the user removes it; a marker makes every later start do nothing."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from qdrant_client import QdrantClient

from shared.embedding.bm25 import DEFAULT_LANGUAGE, encoding_of
from shared.store.bm25_terms import with_terms
from shared.store.edge.engine import EdgeStore
from shared.store.edge.folders import MIGRATION_MARKER
from shared.store.interface import StoredPoint
from shared.store.qdrant.rules import collection_state

log = logging.getLogger(__name__)

MARKER = MIGRATION_MARKER
PAGE = 256

LanguageOf = Callable[[str], str]  # a collection's name -> its agent's BM25 language


def _default_language(_: str) -> str:
    return DEFAULT_LANGUAGE


class MigrationFailed(RuntimeError):
    """A collection's copy does not hold what the old folder holds; nothing was marked done."""


@dataclass
class Migration:
    """What one migration copied: points by collection, and the collections it could not."""

    points: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def local_folder(data_dir: Path) -> Path:
    return data_dir / "qdrant"


def needs_migration(data_dir: Path, store: EdgeStore) -> bool:
    old = local_folder(data_dir)
    return (old / "collection").is_dir() and not (store.root / MARKER).exists()


def migrate_local_mode(
    data_dir: Path, store: EdgeStore, language_of: LanguageOf = _default_language
) -> Migration | None:
    """Copies every collection of the local-mode folder into `store`; None when there is
    nothing to do (no old folder, or migrated before)."""
    if not needs_migration(data_dir, store):
        return None
    old = local_folder(data_dir)
    started = time.monotonic()
    log.info("migrating Qdrant local-mode data in %s to Qdrant Edge in %s", old, store.root)
    client = QdrantClient(path=str(old))
    try:
        done = Migration()
        for described in client.get_collections().collections:
            _copy(client, store, described.name, done, language_of(described.name))
    finally:
        client.close()
    done.seconds = time.monotonic() - started
    _mark(store.root / MARKER, done)
    log.warning(
        "migrated %d points in %d collections to Qdrant Edge in %.1f s; the old folder %s is "
        "kept and no longer read: remove it once you are satisfied",
        sum(done.points.values()), len(done.points), done.seconds, old,
    )  # fmt: skip
    for name, why in done.skipped.items():
        log.error("collection %s was not migrated: %s", name, why)
    return done


def _copy(
    client: QdrantClient, store: EdgeStore, name: str, done: Migration, language: str
) -> None:
    state = collection_state(name, client.get_collection(name))
    if state.size is None:
        done.skipped[name] = "it has named vectors, not one unnamed vector"
        return
    wanted = encoding_of(language)
    # terms recorded as another language's stay for the backfill to re-make; terms of no
    # recorded encoding are made again, in the agent's language, with the missing ones
    make_terms = state.bm25_encoding in (None, wanted)
    if store.collection(name) is None:
        encoding = wanted if make_terms else state.bm25_encoding
        store.create(name, size=state.size, model=state.model, bm25_encoding=encoding)
    offset = None
    while True:
        records, offset = client.scroll(
            name, limit=PAGE, offset=offset, with_payload=True, with_vectors=True
        )
        batch = [StoredPoint.read(str(r.id), r.payload, r.vector) for r in records]
        if make_terms:
            if state.bm25_encoding is None:
                batch = [replace(p, sparse=None) for p in batch]
            batch = with_terms(batch, language)
        store.write_points(name, batch)
        if offset is None:
            break
    expected = client.count(name, exact=True).count
    copied = store.count(name)
    if copied != expected:
        raise MigrationFailed(
            f"collection {name}: {expected} points in the local-mode folder, {copied} in Qdrant "
            "Edge; the old folder is untouched, the next start tries again"
        )
    # indexed now, before serve answers: one long optimize here stalls nobody
    store.optimize(name)
    done.points[name] = copied


def _mark(marker: Path, done: Migration) -> None:
    temporary = marker.with_suffix(".tmp")
    record = {"points": done.points, "skipped": done.skipped, "at": int(time.time())}
    temporary.write_text(json.dumps(record, sort_keys=True), encoding="utf-8")
    os.replace(temporary, marker)

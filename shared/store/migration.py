"""The data folder of the previous version (qdrant-client's local mode in `<data_dir>/qdrant`)
copied into Qdrant Edge shards on serve's first start: every point with its vectors and payload,
checked by count. The old folder is kept until the user removes it; a marker makes every later
start do nothing."""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from qdrant_client import QdrantClient

from shared.store.edge.engine import EdgeStore
from shared.store.edge.folders import MIGRATION_MARKER
from shared.store.interface import StoredPoint
from shared.store.qdrant.rules import collection_state

log = logging.getLogger(__name__)

MARKER = MIGRATION_MARKER
PAGE = 256


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


def migrate_local_mode(data_dir: Path, store: EdgeStore) -> Migration | None:
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
            _copy(client, store, described.name, done)
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


def _copy(client: QdrantClient, store: EdgeStore, name: str, done: Migration) -> None:
    state = collection_state(name, client.get_collection(name))
    if state.size is None:
        done.skipped[name] = "it has named vectors, not one unnamed vector"
        return
    if store.collection(name) is None:
        store.create(name, size=state.size, model=state.model, bm25_encoding=state.bm25_encoding)
    offset = None
    while True:
        records, offset = client.scroll(
            name, limit=PAGE, offset=offset, with_payload=True, with_vectors=True
        )
        batch = [StoredPoint.read(str(r.id), r.payload, r.vector) for r in records]
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

"""Makes sure an agent's collection exists and suits the embedding model, once per process."""

from __future__ import annotations

import logging
import threading

import redis

from shared.embedding.embedder import Embedder
from shared.errors import DimensionMismatch, ModelMismatch
from shared.state import keys
from shared.store.interface import Store

log = logging.getLogger(__name__)


class CollectionGuard:
    """Creates collections on first use and holds an agent's writes when its collection differs.

    Only successes are cached: a mismatch is checked again on every flush, so fixing the
    configuration (or the collection) lets the held messages through without a restart.
    """

    def __init__(self, store: Store, embedder: Embedder, client: redis.Redis) -> None:
        self.store = store
        self.embedder = embedder
        self.redis = client
        self._ready: set[str] = set()
        self._lock = threading.Lock()

    def ensure(self, collection: str) -> None:
        """Raise DimensionMismatch/ModelMismatch (after flagging the agent) or return when ready."""
        with self._lock:
            if collection in self._ready:
                return
        try:
            self.store.ensure_collection(
                collection, size=self.embedder.dimensions(), model=self.embedder.model
            )
        except (DimensionMismatch, ModelMismatch) as exc:
            log.error("writes to collection %s are held: %s", collection, exc)
            self.redis.set(keys.blocked(collection), str(exc))
            raise
        self.redis.delete(keys.blocked(collection))
        with self._lock:
            self._ready.add(collection)

    def forget(self, collection: str) -> None:
        """The collection vanished (deleted outside memory-pool): create it again next time."""
        with self._lock:
            self._ready.discard(collection)

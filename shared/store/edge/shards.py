"""The open Qdrant Edge shards of one process: each opened once and guarded by its own lock,
the data folder locked against a second process, writes counted toward indexing, and the
optimizer that indexes what was written."""

from __future__ import annotations

import fcntl
import logging
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import qdrant_edge as edge

from shared.errors import CollectionMissing, StoreRefused
from shared.store.edge.convert import EDGE_REFUSALS
from shared.store.edge.folders import DataFolder
from shared.store.edge.traffic import RecallTraffic
from shared.store.edge.tuning import OPTIMIZE_EVERY_SECONDS, SEGMENT_POINTS

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class Shard:
    """One open Edge shard, its lock (every call on it), and whether it was written since
    its last optimize."""

    handle: edge.EdgeShard
    lock: threading.RLock = field(default_factory=threading.RLock)
    dirty: bool = False
    unindexed: int = 0  # points written (or moved by an update) since the last optimize


class Shards:
    """Every shard of a data folder this process has opened."""

    def __init__(
        self, folder: DataFolder, *, optimize_in_background: bool, optimize_by_writer: bool
    ) -> None:
        self.folder = folder
        # False only for bench/recall_embedded.py's baseline: the background optimizer alone
        self._optimize_by_writer = optimize_by_writer
        folder.root.mkdir(parents=True, exist_ok=True)
        # Edge does not guard its files against a second process: this lock does, for as long
        # as the store is open (released by the kernel if the process dies)
        self._lock_file = open(folder.root / ".lock", "a+b")  # noqa: SIM115 - held until close()
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            self._lock_file.close()
            raise RuntimeError(
                f"{folder.root} is open in another process; an Edge shard is opened by one "
                "process (several processes need a Qdrant server: QDRANT_URL)"
            ) from exc
        self.open: dict[str, Shard] = {}
        self.lock = threading.Lock()  # opening, creating and dropping shards; metadata writes
        self.traffic = RecallTraffic()
        self.closed = threading.Event()
        self._optimizer: threading.Thread | None = None
        if optimize_in_background:
            self._optimizer = threading.Thread(
                target=self._optimize_loop, name="edge-optimizer", daemon=True
            )
            self._optimizer.start()

    def close(self) -> None:
        self.closed.set()
        if self._optimizer is not None:
            self._optimizer.join(timeout=60)
        with self.lock:
            for shard in self.open.values():
                with shard.lock:
                    shard.handle.close()
            self.open.clear()
        if not self._lock_file.closed:
            self._lock_file.close()

    def record(self, name: str, /, **entries: Any) -> None:
        with self.lock:
            self.folder.record(name, **entries)

    def get(self, name: str) -> Shard | None:
        """The open shard of a collection; None when it does not exist."""
        with self.lock:
            shard = self.open.get(name)
            if shard is None:
                if not self.folder.has_shard(name):
                    return None
                path = self.folder.shard_path(name)
                shard = self.open[name] = Shard(edge.EdgeShard.load(str(path)))
            return shard

    def create(self, name: str, config: edge.EdgeConfig) -> None:
        with self.lock:
            path = self.folder.shard_path(name)
            if name not in self.open and not self.folder.has_shard(name):
                self.open[name] = Shard(edge.EdgeShard.create(str(path), config))
                log.info("Qdrant Edge shard %s created in %s", name, path)

    def drop(self, name: str) -> None:
        """The shard and its metadata removed (nothing else refers to them)."""
        with self.lock:
            shard = self.open.pop(name, None)
            if shard is not None:
                with shard.lock:
                    shard.handle.close()
            shutil.rmtree(self.folder.shard_path(name), ignore_errors=True)
            self.folder.meta_path(name).unlink(missing_ok=True)

    def call(self, name: str, call: Callable[[edge.EdgeShard], T], *, missing: T) -> T:
        shard = self.get(name)
        if shard is None:
            return missing
        with shard.lock:
            return call(shard.handle)

    def recall(self, name: str, call: Callable[[edge.EdgeShard], T], *, missing: T) -> T:
        """A call() that bulk work gives way to (traffic.py)."""
        with self.traffic.recall():
            return self.call(name, call, missing=missing)

    def write(self, name: str, operation: edge.UpdateOperation, *, points: int = 0) -> None:
        """One update; the `points` it writes (or moves out of an indexed segment: an update)
        are counted, and a segment's worth is indexed at once by this writer."""
        shard = self.get(name)
        if shard is None:
            raise CollectionMissing(f"collection {name!r} does not exist")
        with shard.lock:
            try:
                shard.handle.update(operation)
            except ValueError as exc:  # an id or value Edge cannot parse
                raise StoreRefused(f"Qdrant Edge refused the write: {exc}") from exc
            except Exception as exc:  # Edge raises bare Exceptions: told apart by their text
                if str(exc).startswith(EDGE_REFUSALS):
                    raise StoreRefused(f"Qdrant Edge refused the write: {exc}") from exc
                raise
            shard.dirty = True
            shard.unindexed += points
            if self._optimize_by_writer and shard.unindexed >= SEGMENT_POINTS:
                took = self._optimize_held(shard)
                log.debug("Qdrant Edge indexed a segment of %s in %.0f ms", name, took * 1000)

    # --- indexing ------------------------------------------------------------------------------

    def optimize(self, name: str) -> float:
        """Indexes what was written since the last run (HNSW for full segments); the seconds
        it took, all of them with the GIL held."""
        shard = self.get(name)
        if shard is None:
            return 0.0
        with shard.lock:
            return self._optimize_held(shard)

    @staticmethod
    def _optimize_held(shard: Shard) -> float:
        started = time.perf_counter()
        shard.dirty = False
        shard.unindexed = 0
        shard.handle.optimize()
        return time.perf_counter() - started

    def optimize_written(self) -> None:
        """One optimize of every shard written since its last one."""
        with self.lock:
            dirty = [name for name, shard in self.open.items() if shard.dirty]
        for name in dirty:
            if self.closed.is_set():
                return
            took = self.optimize(name)
            if took > 0.1:
                log.info("Qdrant Edge optimized %s in %.0f ms", name, took * 1000)

    def _optimize_loop(self) -> None:
        while not self.closed.wait(OPTIMIZE_EVERY_SECONDS):
            try:
                self.optimize_written()
            except Exception:  # the next run tries again; a query meanwhile is only slower
                log.exception("Qdrant Edge optimize failed")

    def flush(self) -> None:
        with self.lock:
            shards = list(self.open.values())
        for shard in shards:
            with shard.lock:
                shard.handle.flush()

"""The Store on Qdrant Edge (qdrant-edge-py): the embedded engine of `memory-pool serve`, the
same segment, HNSW, payload-index and sparse-vector code as a Qdrant server, in-process.

One Edge shard per collection under `<data_dir>/edge/<collection>/`, with what Qdrant keeps as
collection metadata (model, vector size, BM25 encoding) in `<collection>.json` beside it. A name
that is no plain folder name (Qdrant allows spaces, accents, "!"... in collection names) gets a
folder named by its digest, and the metadata records the name. An Edge shard is opened by one
process: separate `memory-pool worker` processes need a Qdrant server.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import qdrant_edge as edge

from shared import store
from shared.bm25 import VECTOR_NAME, Terms
from shared.edge_filters import to_edge
from shared.errors import CollectionMissing, DimensionMismatch, StoreRefused
from shared.fields import TIMESTAMP
from shared.filters import Filter, HasIds
from shared.format import RecallHit
from shared.memory_query import qdrant_id
from shared.store_browse import Point
from shared.store_rules import check_compatible

if TYPE_CHECKING:
    from collections.abc import Callable

    from shared.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")

SCHEMAS = {"keyword": edge.PayloadSchemaType.Keyword, "integer": edge.PayloadSchemaType.Integer}
# Qdrant's default RRF constant, as the server uses for `{"fusion": "rrf"}`.
RRF_K = 60
# A collection name used as it is for its folder (every name memory-pool derives is one); room
# is left for the ".json" beside it within the file system's 255 bytes.
SAFE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,245}")
# Any other name's folder: this prefix (never the start of a safe name) and its digest.
DIGEST_PREFIX = "~"
# local_migration.py's record in the same folder: no collection's metadata may take its name.
MIGRATION_MARKER = "migrated-from-local-mode.json"
# Edge indexes only in optimize(), which holds the GIL for its whole run (qdrant-edge-py
# 0.9.0), so every other thread of serve (a /save, a /retrieve) waits meanwhile. Its cost is
# per point, mostly the payload indexes (BENCHMARKS.md §13: ~0.3 s for 650 points at 384 or
# 3,072 dimensions), so a segment holds SEGMENT_POINTS points whatever the vector size: each
# run indexes one such segment, well under half a second. Not fewer: every segment maps
# ~150 files and a process may map 65,530 (vm.max_map_count), i.e. ~400 segments for all of
# serve's collections (~250,000 chunks; more need a Qdrant server or a higher limit).
SEGMENT_POINTS = 650
# No HNSW graph: a segment this small is under Qdrant's full-scan threshold (10 MB of
# vectors), where the search is a plain scan whether a graph exists or not; building one cost
# a fifth of each optimize for nothing.
HNSW = edge.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000)
# The scan reads int8 copies of the vectors (a quarter of the memory traffic: 50k x 3,072
# recalled in 19 ms instead of 32), and the best candidates (twice the limit) are scored
# again on the original vectors, so the scores and the order are the exact cosines. Costs
# ~15% more per optimize (BENCHMARKS.md §13d).
QUANTIZED = edge.ScalarQuantizationConfig(type=edge.ScalarType.Int8, quantile=0.99, always_ram=True)
RESCORED = edge.SearchParams(
    quantization=edge.QuantizationSearchParams(rescore=True, oversampling=2.0)
)
# A cosine of given points is read exactly, never from the int8 copies.
EXACT = edge.SearchParams(exact=True)
# What a missing collection reads as (never mutated)
NO_HITS: list[edge.ScoredPoint] = []
NO_RECORDS: list[edge.Record] = []
NO_PAGE: tuple[list[edge.Record], Any] = ([], None)
# Edge's errors for the content of a write (its OperationError texts, as a server answers them
# with 400 "Wrong input: ..."): the same write is refused again.
EDGE_REFUSALS = (
    "Wrong input",
    "Vector dimension error",
    "Not existing vector name",
    "Payload type does not match",
    "Validation",
)
# How often the background optimizer looks at shards written since its last run.
OPTIMIZE_EVERY_SECONDS = 2.0
# A bulk write (an import, a migration, the BM25 backfill) goes in slices of at most half a
# segment, and the writer itself optimizes as soon as a segment's worth is unindexed: one
# optimize then indexes one segment, never the many a background run would find after a fast
# import (a 10k import indexed in one run held the GIL for seconds; BENCHMARKS.md §13).
SLICE_POINTS = min(store.UPSERT_BATCH, SEGMENT_POINTS // 2)


def segment_kb(dims: int) -> int:
    """SEGMENT_POINTS of `dims`-dimensional vectors in KB, as Edge's thresholds count."""
    return max(1, SEGMENT_POINTS * 4 * dims // 1024)


def optimizers(dims: int) -> edge.EdgeOptimizersConfig:
    size = segment_kb(dims)
    return edge.EdgeOptimizersConfig(indexing_threshold=size, max_segment_size=size)


@dataclass
class Shard:
    """One open Edge shard, its lock (every call on it), and whether it was written since
    its last optimize."""

    handle: edge.EdgeShard
    lock: threading.RLock = field(default_factory=threading.RLock)
    dirty: bool = False
    unindexed: int = 0  # points written (or moved by an update) since the last optimize


class EdgeStore(store.Store):
    """Collections as Qdrant Edge shards in one folder, for one process."""

    def __init__(
        self, root: Path, *, optimize_in_background: bool = True, optimize_by_writer: bool = True
    ) -> None:
        self.root = root
        # False only for bench/recall_embedded.py's baseline: the background optimizer alone
        self._optimize_by_writer = optimize_by_writer
        self.root.mkdir(parents=True, exist_ok=True)
        # Edge does not guard its files against a second process: this lock does, for as long
        # as the store is open (released by the kernel if the process dies)
        self._lock_file = open(root / ".lock", "a+b")  # noqa: SIM115 - held until close()
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            self._lock_file.close()
            raise RuntimeError(
                f"{root} is open in another process; an Edge shard is opened by one process "
                "(several processes need a Qdrant server: QDRANT_URL)"
            ) from exc
        self.bm25: dict[str, bool] = {}
        self._shards: dict[str, Shard] = {}
        self._open_lock = threading.Lock()
        self._closed = threading.Event()
        self._optimizer: threading.Thread | None = None
        if optimize_in_background:
            self._optimizer = threading.Thread(
                target=self._optimize_loop, name="edge-optimizer", daemon=True
            )
            self._optimizer.start()

    @classmethod
    def open(cls, settings: Settings) -> EdgeStore:
        return cls(settings.data_dir / "edge")

    @property
    def local(self) -> bool:
        return False  # indexed filters and HNSW, as on a server

    @property
    def kind(self) -> str:
        return "embedded"

    def close(self) -> None:
        self._closed.set()
        if self._optimizer is not None:
            self._optimizer.join(timeout=60)
        with self._open_lock:
            for shard in self._shards.values():
                with shard.lock:
                    shard.handle.close()
            self._shards.clear()
        if not self._lock_file.closed:
            self._lock_file.close()

    def ping(self) -> bool:
        return not self._closed.is_set() and self.root.is_dir()

    # --- shards ------------------------------------------------------------------------------

    def _path(self, name: str) -> Path:
        return self.root / _folder(name)

    def collection_names(self) -> list[str]:
        """The collections of the data folder's shard folders (a folder left empty by a failed
        create is none): a digest folder's name as its metadata records it."""
        names = []
        for path in self.root.iterdir():
            if not (path.is_dir() and any(path.iterdir())):
                continue
            if _plain(path.name):
                names.append(path.name)
            elif path.name.startswith(DIGEST_PREFIX):
                recorded = self._read_metadata(self.root / f"{path.name}.json").get("name")
                if isinstance(recorded, str) and _folder(recorded) == path.name:
                    names.append(recorded)
        return sorted(names)

    def _meta_path(self, name: str) -> Path:
        return self.root / f"{_folder(name)}.json"

    def _shard(self, name: str) -> Shard | None:
        """The open shard of a collection; None when it does not exist."""
        with self._open_lock:
            shard = self._shards.get(name)
            if shard is None:
                path = self._path(name)
                if not (path.is_dir() and any(path.iterdir())):
                    return None
                shard = self._shards[name] = Shard(edge.EdgeShard.load(str(path)))
            return shard

    def _with(self, name: str, call: Callable[[edge.EdgeShard], T], *, missing: T) -> T:
        shard = self._shard(name)
        if shard is None:
            return missing
        with shard.lock:
            return call(shard.handle)

    def _write(self, name: str, operation: edge.UpdateOperation, *, points: int = 0) -> None:
        """One update; the `points` it writes (or moves out of an indexed segment: an update)
        are counted, and a segment's worth is indexed at once by this writer."""
        shard = self._shard(name)
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

    def _metadata(self, name: str) -> dict[str, Any]:
        return self._read_metadata(self._meta_path(name))

    @staticmethod
    def _read_metadata(path: Path) -> dict[str, Any]:
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        return loaded if isinstance(loaded, dict) else {}

    def _record(self, name: str, /, **entries: Any) -> None:
        """Metadata merged key by key (as Qdrant does), written atomically: a crash leaves
        the old file or the new one, never half of one."""
        with self._open_lock:
            metadata = {**self._metadata(name), **entries}
            target = self._meta_path(name)
            temporary = target.with_suffix(".json.tmp")
            temporary.write_text(json.dumps(metadata, sort_keys=True), encoding="utf-8")
            with open(temporary, "rb") as written:
                os.fsync(written.fileno())
            os.replace(temporary, target)

    # --- collections ---------------------------------------------------------------------

    def collection(self, name: str) -> store.CollectionState | None:
        shard = self._shard(name)
        if shard is None:
            return None
        with shard.lock:
            info = shard.handle.info()
        metadata = self._metadata(name)
        size = metadata.get("dimensions")
        model = metadata.get("embedding_model")
        encoding = metadata.get("bm25_encoding")
        return store.CollectionState(
            name=name,
            size=size if isinstance(size, int) else None,
            points_count=info.points_count,
            model=model if isinstance(model, str) else None,
            indexed_fields=frozenset(info.payload_schema),
            sparse_names=(VECTOR_NAME,),
            bm25_encoding=encoding if isinstance(encoding, str) else None,
        )

    def ensure_collection(self, name: str, *, size: int, model: str) -> store.CollectionState:
        state = self.collection(name)
        if state is None:
            self._create(name, size=size, model=model)
            state = self.collection(name)
            assert state is not None
        check_compatible(state, size=size, model=model)
        if state.model is None:
            self._record(name, embedding_model=model, dimensions=size)
            state = self.collection(name)
            assert state is not None
        missing = [f for f in store.PAYLOAD_INDEXES if f not in state.indexed_fields]
        for field_name in missing:
            self._write(
                name,
                edge.UpdateOperation.create_field_index(
                    field_name, SCHEMAS[store.PAYLOAD_INDEXES[field_name]]
                ),
            )
        if missing:
            state = self.collection(name)
            assert state is not None
        self.bm25[name] = True
        return state

    def create(
        self, name: str, *, size: int, model: str | None, bm25_encoding: str | None = None
    ) -> None:
        """A new collection as memory-pool makes them (for the migration: its model and
        encoding as recorded, possibly none)."""
        self._create(name, size=size, model=model)
        if bm25_encoding is not None:
            self._record(name, bm25_encoding=bm25_encoding)
        for field_name, schema in store.PAYLOAD_INDEXES.items():
            self._write(name, edge.UpdateOperation.create_field_index(field_name, SCHEMAS[schema]))

    def _create(self, name: str, *, size: int, model: str | None) -> None:
        config = edge.EdgeConfig(
            vectors=edge.EdgeVectorParams(size=size, distance=edge.Distance.Cosine),
            sparse_vectors={VECTOR_NAME: edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf)},
            hnsw_config=HNSW,
            quantization_config=QUANTIZED,
            optimizers=optimizers(size),
        )
        # the metadata first: a shard is never seen without its size (nor, in a digest folder,
        # its name, which only the metadata tells)
        named = {} if _plain(name) else {"name": name}
        self._record(
            name, **named, dimensions=size, **({"embedding_model": model} if model else {})
        )
        with self._open_lock:
            path = self._path(name)
            if name not in self._shards and not (path.is_dir() and any(path.iterdir())):
                self._shards[name] = Shard(edge.EdgeShard.create(str(path), config))
                log.info("Qdrant Edge shard %s created in %s", name, path)

    def drop_collection(self, name: str) -> None:
        """The collection's shard and metadata removed (nothing else refers to them)."""
        with self._open_lock:
            shard = self._shards.pop(name, None)
            if shard is not None:
                with shard.lock:
                    shard.handle.close()
            shutil.rmtree(self._path(name), ignore_errors=True)
            self._meta_path(name).unlink(missing_ok=True)
        self.bm25.pop(name, None)

    # --- points ----------------------------------------------------------------------------

    def upsert(self, name: str, points: Sequence[store.PointToWrite]) -> None:
        for start in range(0, len(points), SLICE_POINTS):
            batch = points[start : start + SLICE_POINTS]
            structs = [edge.Point(p.id, _vectors(p.vector, p.terms), p.payload) for p in batch]
            self._write(name, edge.UpdateOperation.upsert_points(structs), points=len(batch))

    def nearest(self, name: str, query: store.DenseQuery) -> list[RecallHit]:
        request = edge.QueryRequest(
            limit=query.limit,
            offset=query.offset,
            query=edge.Query.Nearest(list(query.vector)),
            filter=to_edge(query.query_filter),
            score_threshold=query.score_threshold,
            with_payload=True,
            with_vector=False,
            params=RESCORED,
        )
        try:
            found = self._with(name, lambda s: s.query(request), missing=NO_HITS)
        except Exception as e:
            if "dimension" not in str(e):
                raise
            raise DimensionMismatch.of_query(name, len(query.vector), e) from e
        return [RecallHit(id=str(p.id), score=p.score, payload=p.payload or {}) for p in found]

    def fused_query(self, name: str, query: store.FusedQuery) -> list[store.FusedPoint]:
        flt = to_edge(query.query_filter)
        sparse = edge.SparseVector(list(query.terms.indices), list(query.terms.values))
        legs = [
            edge.Prefetch(
                limit=query.prefetch,
                query=edge.Query.Nearest(list(query.dense)),
                filter=flt,
                score_threshold=query.score_threshold,
                params=RESCORED,
            ),
            edge.Prefetch(
                limit=query.prefetch,
                query=edge.Query.Nearest(sparse, using=VECTOR_NAME),
                filter=flt,
                score_threshold=query.lexical_threshold,
            ),
        ]
        how: Any = edge.Fusion.Dbsf() if query.fusion == "dbsf" else edge.Fusion.Rrf(k=RRF_K)
        request = edge.QueryRequest(
            limit=2 * query.prefetch,
            prefetches=legs,
            query=how,
            with_payload=True,
            with_vector=False,
        )
        try:
            found = self._with(name, lambda s: s.query(request), missing=NO_HITS)
        except Exception as exc:
            raise store.LexicalUnavailable(f"{name} refused a fused query: {exc}") from exc
        return [store.FusedPoint(str(p.id), p.score, dict(p.payload or {})) for p in found]

    def cosines(self, name: str, ids: Sequence[str], dense: Sequence[float]) -> dict[str, float]:
        if not ids:
            return {}
        request = edge.QueryRequest(
            limit=len(ids),
            query=edge.Query.Nearest(list(dense)),
            filter=to_edge(Filter(must=(HasIds(tuple(ids)),))),
            with_payload=False,
            params=EXACT,
        )
        found = self._with(name, lambda s: s.query(request), missing=NO_HITS)
        return {str(p.id): p.score for p in found}

    def read_page(self, name: str, request: store.PageRequest) -> tuple[list[Point], store.Offset]:
        fields = request.fields
        scroll = edge.ScrollRequest(
            offset=None if request.offset is None else qdrant_id(str(request.offset)),
            limit=request.limit,
            filter=to_edge(request.query_filter),
            with_payload=True if fields is None else list(fields),
            with_vector=False,
        )
        records, following = self._with(name, lambda s: s.scroll(scroll), missing=NO_PAGE)
        found = [(str(r.id), dict(r.payload or {})) for r in records]
        return found, None if following is None else _offset(following)

    def ordered_page(
        self, name: str, query_filter: Filter | None, limit: int, *, start_from: int | None = None
    ) -> list[Point] | None:
        order = edge.OrderBy(TIMESTAMP, direction=edge.Direction.Desc, start_from=start_from)
        request = edge.ScrollRequest(
            limit=limit, filter=to_edge(query_filter), with_payload=True, order_by=order
        )
        records, _ = self._with(name, lambda s: s.scroll(request), missing=NO_PAGE)
        return [(str(r.id), dict(r.payload or {})) for r in records]

    def point(self, name: str, point_id: str) -> dict[str, Any] | None:
        found = self._with(
            name,
            lambda s: s.retrieve([qdrant_id(point_id)], with_payload=True, with_vector=False),
            missing=NO_RECORDS,
        )
        return dict(found[0].payload or {}) if found else None

    def delete_points(self, name: str, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        shard = self._shard(name)
        if shard is None:
            return 0
        with shard.lock:  # counted and deleted under one hold: no write comes between
            found = shard.handle.count(
                edge.CountRequest(filter=to_edge(Filter(must=(HasIds(tuple(ids)),))), exact=True)
            )
            if found:
                shard.handle.update(edge.UpdateOperation.delete_points([qdrant_id(i) for i in ids]))
                shard.dirty = True
        return found

    def count(self, name: str, query_filter: Filter | None = None) -> int:
        request = edge.CountRequest(filter=to_edge(query_filter), exact=True)
        return self._with(name, lambda s: s.count(request), missing=0)

    def facet_counts(self, name: str, key: str, *, limit: int = 100) -> dict[str, int]:
        request = edge.FacetRequest(key=key, limit=limit, exact=True)
        response = self._with(name, lambda s: s.facet(request), missing=None)
        if response is None:
            return {}
        return {_facet_value(hit.value): int(hit.count) for hit in response.hits}

    # --- BM25 terms ------------------------------------------------------------------------

    def write_missing_terms(self, name: str, terms: Sequence[tuple[str, Terms]]) -> None:
        vectors = [
            edge.PointVectors(
                qdrant_id(pid),
                {VECTOR_NAME: edge.SparseVector(list(t.indices), list(t.values))},
            )
            for pid, t in terms
        ]
        if not vectors:
            return
        lacking = edge.Filter(must_not=[edge.HasVectorCondition(VECTOR_NAME)])
        # an updated point leaves its indexed segment for the appendable one: count it
        try:
            self._write(
                name, edge.UpdateOperation.update_vectors(vectors, lacking), points=len(vectors)
            )
        except Exception as exc:
            # as on a server: the others are written, a deleted point stays deleted
            if "No point with id" not in str(exc):
                raise
            log.debug("backfill of %s: a point was deleted meanwhile: %s", name, exc)

    def drop_terms(self, name: str) -> None:
        if self._shard(name) is not None:
            everything = edge.Filter()
            self._write(
                name, edge.UpdateOperation.delete_vectors_by_filter(everything, [VECTOR_NAME])
            )

    def record_encoding(self, name: str, encoding: str) -> None:
        if self._shard(name) is not None:
            self._record(name, bm25_encoding=encoding)

    # --- moving a pool -----------------------------------------------------------------------

    def points_page(
        self, name: str, offset: store.Offset, *, with_vectors: bool, limit: int
    ) -> tuple[list[store.StoredPoint], store.Offset]:
        request = edge.ScrollRequest(
            offset=None if offset is None else qdrant_id(str(offset)),
            limit=limit,
            with_payload=True,
            with_vector=with_vectors,
        )
        records, following = self._with(name, lambda s: s.scroll(request), missing=NO_PAGE)
        found = [store.StoredPoint.read(str(r.id), r.payload, r.vector) for r in records]
        return found, None if following is None else _offset(following)

    def write_points(self, name: str, points: Sequence[store.StoredPoint]) -> None:
        for start in range(0, len(points), SLICE_POINTS):
            batch = points[start : start + SLICE_POINTS]
            structs = [edge.Point(qdrant_id(p.id), _stored_vectors(p), p.payload) for p in batch]
            self._write(name, edge.UpdateOperation.upsert_points(structs), points=len(batch))

    # --- indexing ------------------------------------------------------------------------------

    def optimize(self, name: str) -> float:
        """Indexes what was written since the last run (HNSW for full segments); the seconds
        it took, all of them with the GIL held."""
        shard = self._shard(name)
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
        with self._open_lock:
            dirty = [name for name, shard in self._shards.items() if shard.dirty]
        for name in dirty:
            if self._closed.is_set():
                return
            took = self.optimize(name)
            if took > 0.1:
                log.info("Qdrant Edge optimized %s in %.0f ms", name, took * 1000)

    def _optimize_loop(self) -> None:
        while not self._closed.wait(OPTIMIZE_EVERY_SECONDS):
            try:
                self.optimize_written()
            except Exception:  # the next run tries again; a query meanwhile is only slower
                log.exception("Qdrant Edge optimize failed")

    def flush(self) -> None:
        with self._open_lock:
            shards = list(self._shards.values())
        for shard in shards:
            with shard.lock:
                shard.handle.flush()


def _plain(folder: str) -> bool:
    """Whether this is a collection's own name as its folder name."""
    return (
        SAFE_NAME.fullmatch(folder) is not None
        and folder not in (".", "..")
        and f"{folder}.json" != MIGRATION_MARKER
    )


def _folder(name: str) -> str:
    """A collection's folder name: the name itself when it is plain, else its digest."""
    if _plain(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:40]
    return DIGEST_PREFIX + digest


def _vectors(dense: Sequence[float], terms: Terms | None) -> Any:
    if terms is None:
        return list(dense)
    sparse = edge.SparseVector(list(terms.indices), list(terms.values))
    return {"": list(dense), VECTOR_NAME: sparse}


def _stored_vectors(point: store.StoredPoint) -> Any:
    vectors: dict[str, Any] = {}
    if point.vector is not None:
        vectors[""] = list(point.vector)
    if point.sparse is not None:
        indices, values = point.sparse
        vectors[VECTOR_NAME] = edge.SparseVector(list(indices), list(values))
    return vectors


def _offset(raw: Any) -> store.Offset:
    return raw if isinstance(raw, int) else str(raw)


def _facet_value(value: Any) -> str:
    return str(value)

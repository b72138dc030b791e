"""The Store on Qdrant Edge (qdrant-edge-py): the embedded engine of `memory-pool serve`, the
same segment, HNSW, payload-index and sparse-vector code as a Qdrant server, in-process.

One Edge shard per collection under `<data_dir>/edge/` (folders.py says where and under which
name), tuned as tuning.py says. An Edge shard is opened by one process: separate
`memory-pool worker` processes need a Qdrant server.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import qdrant_edge as edge

from shared.embedding.bm25 import VECTOR_NAME, Terms
from shared.errors import DimensionMismatch
from shared.format.fields import TIMESTAMP
from shared.format.recall_block import RecallHit
from shared.store import interface as store
from shared.store.browse import Point
from shared.store.edge.convert import (
    NO_HITS,
    NO_PAGE,
    NO_RECORDS,
    SCHEMAS,
    facet_value,
    fusion_of,
    legs_of,
    offset_of,
    point_vectors,
    stored_point_vectors,
)
from shared.store.edge.exclusions import by_point_ids
from shared.store.edge.filters import to_edge
from shared.store.edge.folders import DataFolder, plain
from shared.store.edge.shards import Shards
from shared.store.edge.tuning import (
    EXACT,
    HNSW,
    QUANTIZED,
    RESCORED,
    SLICE_POINTS,
    optimizers,
)
from shared.store.filters import Filter, HasIds
from shared.store.fusion import LegPoint
from shared.store.memory_query import qdrant_id
from shared.store.rules import check_compatible

if TYPE_CHECKING:
    from shared.settings import Settings

log = logging.getLogger(__name__)


class EdgeStore(store.Store):
    """Collections as Qdrant Edge shards in one folder, for one process."""

    def __init__(
        self, root: Path, *, optimize_in_background: bool = True, optimize_by_writer: bool = True
    ) -> None:
        self.root = root
        self.folder = DataFolder(root)
        self.shards = Shards(
            self.folder,
            optimize_in_background=optimize_in_background,
            optimize_by_writer=optimize_by_writer,
        )
        self.bm25: dict[str, bool] = {}

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
        self.shards.close()

    def ping(self) -> bool:
        return not self.shards.closed.is_set() and self.root.is_dir()

    # --- shards ------------------------------------------------------------------------------

    def collection_names(self) -> list[str]:
        return self.folder.collection_names()

    # --- collections ---------------------------------------------------------------------

    def collection(self, name: str) -> store.CollectionState | None:
        shard = self.shards.get(name)
        if shard is None:
            return None
        with shard.lock:
            info = shard.handle.info()
        metadata = self.folder.metadata(name)
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
            self.shards.record(name, embedding_model=model, dimensions=size)
            state = self.collection(name)
            assert state is not None
        missing = [f for f in store.PAYLOAD_INDEXES if f not in state.indexed_fields]
        for field_name in missing:
            self.shards.write(
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
            self.shards.record(name, bm25_encoding=bm25_encoding)
        for field_name, schema in store.PAYLOAD_INDEXES.items():
            self.shards.write(
                name, edge.UpdateOperation.create_field_index(field_name, SCHEMAS[schema])
            )

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
        named = {} if plain(name) else {"name": name}
        self.shards.record(
            name, **named, dimensions=size, **({"embedding_model": model} if model else {})
        )
        self.shards.create(name, config)

    def drop_collection(self, name: str) -> None:
        """The collection's shard and metadata removed (nothing else refers to them)."""
        self.shards.drop(name)
        self.bm25.pop(name, None)

    # --- points ----------------------------------------------------------------------------

    def upsert(self, name: str, points: Sequence[store.PointToWrite]) -> None:
        for start in range(0, len(points), SLICE_POINTS):
            batch = points[start : start + SLICE_POINTS]
            structs = [
                edge.Point(qdrant_id(p.id), point_vectors(p.vector, p.terms), p.payload)
                for p in batch
            ]
            self.shards.write(name, edge.UpdateOperation.upsert_points(structs), points=len(batch))

    def nearest(self, name: str, query: store.DenseQuery) -> list[RecallHit]:
        request = edge.QueryRequest(
            limit=query.limit,
            offset=query.offset,
            query=edge.Query.Nearest(list(query.vector)),
            filter=to_edge(self._excluding(name, query.query_filter)),
            score_threshold=query.score_threshold,
            with_payload=True,
            with_vector=False,
            params=RESCORED,
        )
        try:
            found = self.shards.recall(name, lambda s: s.query(request), missing=NO_HITS)
        except Exception as e:
            if "dimension" not in str(e):
                raise
            raise DimensionMismatch.of_query(name, len(query.vector), e) from e
        return [RecallHit(id=str(p.id), score=p.score, payload=p.payload or {}) for p in found]

    def fused_in_store(self, name: str, query: store.FusedQuery) -> list[store.FusedPoint]:
        query = replace(query, query_filter=self._excluding(name, query.query_filter))
        request = edge.QueryRequest(
            limit=2 * query.prefetch,
            prefetches=[edge.Prefetch(**leg) for leg in legs_of(query)],
            query=fusion_of(query),
            with_payload=True,
            with_vector=False,
        )
        try:
            found = self.shards.recall(name, lambda s: s.query(request), missing=NO_HITS)
        except Exception as exc:
            raise store.LexicalUnavailable(f"{name} refused a fused query: {exc}") from exc
        return [store.FusedPoint(str(p.id), p.score, dict(p.payload or {})) for p in found]

    def fusion_legs(
        self, name: str, query: store.FusedQuery
    ) -> tuple[list[LegPoint], list[LegPoint]]:
        """Both legs as fused_in_store prefetches them, under one hold of the shard's lock."""
        query = replace(query, query_filter=self._excluding(name, query.query_filter))
        dense, lexical = (
            edge.QueryRequest(**leg, with_payload=True, with_vector=False) for leg in legs_of(query)
        )
        try:
            found = self.shards.recall(
                name, lambda s: (s.query(dense), s.query(lexical)), missing=(NO_HITS, NO_HITS)
            )
        except Exception as exc:
            raise store.LexicalUnavailable(f"{name} refused a fused query: {exc}") from exc
        as_leg = [
            [LegPoint(str(p.id), p.score, dict(p.payload or {})) for p in leg] for leg in found
        ]
        return as_leg[0], as_leg[1]

    def _excluding(self, name: str, flt: Filter | None) -> Filter | None:
        """A recall's filter with its excluded message ids as point ids (exclusions.py)."""
        return self.shards.recall(name, lambda s: by_point_ids(s, flt), missing=flt)

    def give_way(self, worked: float) -> float:
        return self.shards.traffic.give_way(worked)

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
        found = self.shards.recall(name, lambda s: s.query(request), missing=NO_HITS)
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
        records, following = self.shards.call(name, lambda s: s.scroll(scroll), missing=NO_PAGE)
        found = [(str(r.id), dict(r.payload or {})) for r in records]
        return found, None if following is None else offset_of(following)

    def ordered_page(
        self, name: str, query_filter: Filter | None, limit: int, *, start_from: int | None = None
    ) -> list[Point] | None:
        order = edge.OrderBy(TIMESTAMP, direction=edge.Direction.Desc, start_from=start_from)
        request = edge.ScrollRequest(
            limit=limit, filter=to_edge(query_filter), with_payload=True, order_by=order
        )
        records, _ = self.shards.call(name, lambda s: s.scroll(request), missing=NO_PAGE)
        return [(str(r.id), dict(r.payload or {})) for r in records]

    def point(self, name: str, point_id: str) -> dict[str, Any] | None:
        found = self.shards.call(
            name,
            lambda s: s.retrieve([qdrant_id(point_id)], with_payload=True, with_vector=False),
            missing=NO_RECORDS,
        )
        return dict(found[0].payload or {}) if found else None

    def delete_points(self, name: str, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        shard = self.shards.get(name)
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
        return self.shards.call(name, lambda s: s.count(request), missing=0)

    def facet_counts(self, name: str, key: str, *, limit: int = 100) -> dict[str, int]:
        request = edge.FacetRequest(key=key, limit=limit, exact=True)
        response = self.shards.call(name, lambda s: s.facet(request), missing=None)
        if response is None:
            return {}
        return {facet_value(hit.value): int(hit.count) for hit in response.hits}

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
            self.shards.write(
                name, edge.UpdateOperation.update_vectors(vectors, lacking), points=len(vectors)
            )
        except Exception as exc:
            # as on a server: the others are written, a deleted point stays deleted
            if "No point with id" not in str(exc):
                raise
            log.debug("backfill of %s: a point was deleted meanwhile: %s", name, exc)

    def drop_terms(self, name: str) -> None:
        if self.shards.get(name) is not None:
            everything = edge.Filter()
            self.shards.write(
                name, edge.UpdateOperation.delete_vectors_by_filter(everything, [VECTOR_NAME])
            )

    def record_encoding(self, name: str, encoding: str) -> None:
        if self.shards.get(name) is not None:
            self.shards.record(name, bm25_encoding=encoding)

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
        records, following = self.shards.call(name, lambda s: s.scroll(request), missing=NO_PAGE)
        found = [store.StoredPoint.read(str(r.id), r.payload, r.vector) for r in records]
        return found, None if following is None else offset_of(following)

    def write_points(self, name: str, points: Sequence[store.StoredPoint]) -> None:
        for start in range(0, len(points), SLICE_POINTS):
            batch = points[start : start + SLICE_POINTS]
            structs = [
                edge.Point(qdrant_id(p.id), stored_point_vectors(p), p.payload) for p in batch
            ]
            self.shards.write(name, edge.UpdateOperation.upsert_points(structs), points=len(batch))

    # --- indexing ------------------------------------------------------------------------------

    def optimize(self, name: str) -> float:
        """Indexes what was written since the last run; the seconds it took (GIL held)."""
        return self.shards.optimize(name)

    def optimize_written(self) -> None:
        self.shards.optimize_written()

    def flush(self) -> None:
        self.shards.flush()

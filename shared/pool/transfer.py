"""Moving a pool: an agent's collection and its Redis marks out to an export, and back in.

Both directions stream (a page of points or markers at a time), so memory stays flat for any
size; a copy is an export fed straight into an import.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from shared.embedding.bm25 import DEFAULT_LANGUAGE, encoding_of
from shared.embedding.embedder import Embedder
from shared.errors import DimensionMismatch, InputRejected, ModelMismatch
from shared.pool.format import (
    BadExport,
    DedupeMark,
    End,
    Header,
    Tombstone,
    dedupe_line,
    dumps,
    end_line,
    point_line,
    read_header,
    read_record,
    tombstone_line,
)
from shared.pool.marks import RedisMarks
from shared.store import bm25_terms as bm25_store
from shared.store.interface import Store, StoredPoint

log = logging.getLogger(__name__)

POINT_BATCH = 256
MARK_BATCH = 500

Progress = Callable[[int], object]  # what it returns is ignored (tqdm.update answers)


class TransferRefused(Exception):
    """An export or import that cannot be done as asked; the message says why and what to do."""


def _nothing(_: int) -> None:
    return None


@dataclass
class Moved:
    """What an export, import or copy moved."""

    collection: str
    points: int = 0
    reembedded: int = 0
    refused: int = 0  # chunks the embedding provider refused (or without text) on re-embedding
    tombstones: int = 0
    dedupe: int = 0

    def lines(self) -> list[str]:
        out = [
            f"collection {self.collection}: {self.points} points"
            + (f" ({self.reembedded} re-embedded)" if self.reembedded else ""),
            f"tombstones (deleted message ids): {self.tombstones}",
            f"dedupe marks: {self.dedupe}",
        ]
        if self.refused:
            out.append(f"refused by the embedding model (not stored): {self.refused}")
        return out


def export_lines(
    store: Store,
    marks: RedisMarks,
    *,
    collection: str,
    agent: str,
    vectors: bool = True,
    progress: Progress = _nothing,
    moved: Moved | None = None,
) -> Iterator[str]:
    """The export, line by line (each ending in a newline): header, points, markers, end."""
    state = store.collection(collection)
    if state is None:
        raise TransferRefused(f"collection {collection!r} does not exist: nothing to export")
    snapshot = marks.snapshot(collection)
    expected = store.count(collection)
    header = Header(
        collection=collection,
        agent=agent,
        model=state.model,
        dimensions=state.size,
        bm25_encoding=state.bm25_encoding,
        has_bm25=state.has_bm25,
        vectors=vectors,
        points=expected,
        tombstones=snapshot.tombstones,
        dedupe=snapshot.dedupe,
    )
    moved = moved if moved is not None else Moved(collection)
    yield dumps(header.to_json()) + "\n"
    for point in store.iter_points(collection, with_vectors=vectors):
        yield point_line(point) + "\n"
        moved.points += 1
        progress(1)
    for mark in snapshot:
        if isinstance(mark, Tombstone):
            moved.tombstones += 1
            yield tombstone_line(mark) + "\n"
        else:
            moved.dedupe += 1
            yield dedupe_line(mark) + "\n"
    yield end_line(End(moved.points, moved.tombstones, moved.dedupe)) + "\n"
    if moved.points != expected:
        # a running memory-pool writes on while it exports: the end line has the real count
        log.info("%s: %d points at the start of the export, %d exported", collection,
                 expected, moved.points)  # fmt: skip


@dataclass(frozen=True)
class ImportPlan:
    """How an export goes into its target collection."""

    collection: str
    reembed: bool
    keep_sparse: bool
    size: int
    model: str
    terms_language: str | None = None  # points without terms get them in this language


def plan_import(
    header: Header,
    store: Store,
    embedder: Embedder,
    collection: str,
    language: str = DEFAULT_LANGUAGE,
) -> ImportPlan:
    """Vectors are kept when the export has them, made by the configured model (or by an
    unrecorded one) at its size; else every chunk is embedded again. The target collection is
    created, or refused when it holds another size or model. BM25 terms as `sparse_plan` says."""
    size, model = embedder.dimensions(), embedder.model
    same = header.vectors and header.dimensions == size and header.model in (None, model)
    try:
        state = store.ensure_collection(collection, size=size, model=model)
    except (DimensionMismatch, ModelMismatch) as exc:
        raise TransferRefused(
            f"{exc}. Import into a new collection (--collection NAME) made with the configured "
            "model, or configure the model that collection was made with"
        ) from exc
    keep_sparse, terms_language = sparse_plan(header, state.has_bm25, state.bm25_encoding,
                                              language)  # fmt: skip
    if terms_language is not None and state.bm25_encoding is None:
        # recorded before the first point: the backfill, seeing it, never re-makes these terms
        bm25_store.record_encoding(store, collection, encoding_of(language))
    return ImportPlan(collection, reembed=not same, keep_sparse=keep_sparse, size=size,
                      model=model, terms_language=terms_language)  # fmt: skip


def sparse_plan(
    header: Header, has_bm25: bool, recorded: str | None, language: str
) -> tuple[bool, str | None]:
    """(keep the file's terms, the language to make the missing ones in, or None for none).

    Every point is written with its terms (no backfill after an import) where the collection
    holds, or will hold, terms of `language`: the file's are kept when made the same way, the
    others made from the point's text. A collection recording another encoding keeps the
    file's terms of that encoding and leaves the rest to the backfill, which alone re-makes a
    collection's terms for a new language."""
    if not has_bm25:
        return False, None  # a server without sparse vectors: dense only
    same_file = header.vectors and header.has_bm25
    wanted = encoding_of(language)
    if recorded not in (None, wanted):
        return bool(same_file and header.bm25_encoding == recorded), None
    return bool(same_file and header.bm25_encoding == wanted), language


def import_lines(
    lines: Iterable[str],
    *,
    store: Store,
    marks: RedisMarks,
    embedder: Embedder,
    collection: str | None = None,
    progress: Progress = _nothing,
    check_count: bool = True,
    agent: str | None = None,
    language: str = DEFAULT_LANGUAGE,
) -> Moved:
    """Loads an export into `collection` (default: the one it was exported from). Idempotent:
    points keep their ids, markers merge (see RedisMarks.restore). `agent`: the agent whose own
    collection this is, recorded (unless one is already) as /save records a new agent, so the
    moved agent is listed (/agents, /health, the viewer) before it saves anything here.
    `language`: the BM25 language of the points' terms (the agent's)."""
    numbered = enumerate(lines, start=1)
    first = next(numbered, None)
    if first is None:
        raise BadExport("the file is empty")
    header = read_header(first[1])
    target = collection or header.collection

    def start() -> _Loader:
        # planned (the target collection made) once a record has been read whole: a file
        # broken from its first record on leaves nothing behind, not an empty collection
        plan = plan_import(header, store, embedder, target, language)
        loader = _Loader(plan, store, marks, embedder)
        loader.progress = progress
        if agent is not None:
            marks.record_agent(target, agent)
        return loader

    loader, end = _load_records(numbered, start)
    if loader is None and check_count:
        check_end(end, 0, 0)  # a header alone was cut short: refused before making anything
    loader = loader or start()
    loader.finish()
    if check_count:
        check_end(end, loader.read_points, loader.read_marks)
    return loader.moved


def _load_records(
    numbered: Iterator[tuple[int, str]], start: Callable[[], _Loader]
) -> tuple[_Loader | None, End | None]:
    """Every record up to the end line into a loader (started at the first record); the end
    line, if the file has one."""
    loader: _Loader | None = None
    end: End | None = None
    for line_no, line in numbered:
        if not line.strip():
            continue
        if end is not None:
            raise BadExport(f"line {line_no}: a line after the end line")
        record = read_record(line, line_no)
        if isinstance(record, End):
            end = record
        else:
            loader = loader or start()
            loader.add(record, line_no)
    return loader, end


class _Loader:
    """Records of an export, written in batches: points to the store, markers to Redis."""

    def __init__(self, plan: ImportPlan, store: Store, marks: RedisMarks, embedder: Embedder):
        self.plan, self.store, self.marks, self.embedder = plan, store, marks, embedder
        self.moved = Moved(plan.collection)
        self.progress: Progress = _nothing
        self.points: list[StoredPoint] = []
        self.pending: list[Tombstone | DedupeMark] = []
        self.read_points = self.read_marks = 0

    def add(self, record: StoredPoint | Tombstone | DedupeMark, line_no: int) -> None:
        if isinstance(record, StoredPoint):
            self.read_points += 1
            size = self.plan.size
            if not self.plan.reembed and (record.vector is None or len(record.vector) != size):
                raise BadExport(f"line {line_no}: the vector does not have {size} numbers")
            self.points.append(record)
            if len(self.points) >= POINT_BATCH:
                self._write()
        else:
            self.read_marks += 1
            self.pending.append(record)
            if len(self.pending) >= MARK_BATCH:
                self._restore()

    def finish(self) -> None:
        self._write()
        self._restore()

    def _write(self) -> None:
        if self.points:
            _write_points(self.points, self.plan, self.store, self.embedder, self.moved,
                          self.progress)  # fmt: skip
            self.points = []

    def _restore(self) -> None:
        if self.pending:
            _restore(self.pending, self.marks, self.plan.collection, self.moved)
            self.pending = []


def check_end(end: End | None, points: int, marks: int) -> None:
    """A whole export ends with its counts; anything else was cut short."""
    cut = "(what was read is stored; importing the whole file again is safe)"
    if end is None:
        raise BadExport(f"the file is cut short: it has no end line {cut}")
    if (points, marks) != (end.points, end.tombstones + end.dedupe):
        raise BadExport(
            f"the file holds {points} points and {marks} marks, its end line says "
            f"{end.points} and {end.tombstones + end.dedupe} {cut}"
        )


def _write_points(
    points: list[StoredPoint],
    plan: ImportPlan,
    store: Store,
    embedder: Embedder,
    moved: Moved,
    progress: Progress,
) -> None:
    if not points:
        return
    if plan.reembed:
        points = _reembedded(points, embedder, moved)
    if not plan.keep_sparse:
        points = [replace(p, sparse=None) for p in points]
    if plan.terms_language is not None:
        points = bm25_store.with_terms(points, plan.terms_language)
    store.write_points(plan.collection, points)
    moved.points += len(points)
    progress(len(points))


def _reembedded(points: list[StoredPoint], embedder: Embedder, moved: Moved) -> list[StoredPoint]:
    with_text = [p for p in points if isinstance(p.payload.get("text"), str)]
    moved.refused += len(points) - len(with_text)
    vectors = embedder.embed([str(p.payload["text"]) for p in with_text])
    kept: list[StoredPoint] = []
    for point, vector in zip(with_text, vectors, strict=True):
        if isinstance(vector, InputRejected):
            log.warning(
                "point %s not imported: the embedding model refused it: %s", point.id, vector
            )
            moved.refused += 1
            continue
        kept.append(replace(point, vector=list(vector)))
    moved.reembedded += len(kept)
    return kept


def _restore(
    pending: list[Tombstone | DedupeMark], marks: RedisMarks, collection: str, moved: Moved
) -> None:
    marks.restore(collection, pending, int(time.time() * 1000))
    moved.tombstones += sum(1 for m in pending if isinstance(m, Tombstone))
    moved.dedupe += sum(1 for m in pending if isinstance(m, DedupeMark))

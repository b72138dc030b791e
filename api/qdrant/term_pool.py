"""The BM25 terms of a /qdrant upsert's texts, a large one's made in a child process.

Terms are made where the points are written, and jieba (Chinese words) is pure Python: made in
the API's process, 200 texts of 5,000 random Han took ~33 s of its GIL, while every other
agent's /retrieve in the same process waited (BENCHMARKS.md, section 15.3). An upsert of more
text than IN_PROCESS_CHARS is termed in one child process instead (spawned on the first such
upsert, its own fastembed and jieba, at nice 10; later ones wait their turn there);
st-qdrant-memory's usual upsert, one chunk, is termed in process as before. Both make the same
terms (shared/embedding/bm25.py `documents_terms`, the same code and dictionary).

A child that died (killed, out of memory) is replaced once per request; when that fails too the
upsert is answered 503 in Qdrant's shape, nothing written.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from api.qdrant.shape import QdrantRefusal
from shared.embedding.bm25 import Terms, documents_terms

log = logging.getLogger(__name__)

# Characters of text of one upsert termed in process: 4,000 of random Han (jieba's worst case)
# take ~100 ms there, 2,000 ~50 ms, English ~0.5 ms; a round trip to the child ~1 ms more
# than that (section 15.3).
IN_PROCESS_CHARS = 4000
CHILD_NICENESS = 10


def _lower_priority() -> None:
    """The child yields a core to the API's recalls when they want it (section 15.3)."""
    if hasattr(os, "nice"):  # not on Windows
        os.nice(CHILD_NICENESS)


def unavailable(why: str) -> QdrantRefusal:
    return QdrantRefusal(
        503, f"Service unavailable: the BM25 terms of this upsert could not be made ({why}); "
        "nothing was written, try again",
    )  # fmt: skip


class TermPool:
    """Terms of an upsert's texts: in process up to `in_process_chars`, else in the child."""

    def __init__(self, in_process_chars: int | None = None) -> None:
        self.in_process_chars = IN_PROCESS_CHARS if in_process_chars is None else in_process_chars
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._closed = False

    def terms(self, texts: Sequence[str], language: str) -> list[Terms]:
        if sum(len(text) for text in texts) <= self.in_process_chars:
            return documents_terms(list(texts), language)
        for _ in range(2):  # a dead child is replaced once
            pool = self._current()
            try:
                return pool.submit(documents_terms, list(texts), language).result()
            except BrokenProcessPool:
                log.warning("the BM25 term process stopped; starting another", exc_info=True)
                self._discard(pool)
        raise unavailable("its process stopped twice")

    def _current(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._closed:
                raise unavailable("the API is shutting down")
            if self._pool is None:
                try:  # spawn: the API has threads, a fork could copy a held lock
                    context = multiprocessing.get_context("spawn")
                    self._pool = ProcessPoolExecutor(
                        max_workers=1, mp_context=context, initializer=_lower_priority
                    )
                except OSError as exc:
                    log.error("cannot start the BM25 term process: %s", exc)
                    raise unavailable(f"its process cannot start: {exc}") from exc
            return self._pool

    def _discard(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
        pool.shutdown(wait=False, cancel_futures=True)

    @property
    def started(self) -> bool:
        return self._pool is not None

    def close(self) -> None:
        """Stops the child (the app's shutdown); later large upserts are answered 503."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

"""The BM25 terms of a /qdrant upsert's texts, a large one's made in a child process.

Terms are made where the points are written, and jieba (Chinese words) is pure Python: made in
the API's process, 200 texts of 5,000 random Han took ~33 s of its GIL, while every other
agent's /retrieve in the same process waited (BENCHMARKS.md, section 15.3). An upsert of more
text than IN_PROCESS_CHARS is termed in one child process instead (spawned on the first such
upsert, its own fastembed, jieba and SudachiPy, at nice 10); st-qdrant-memory's usual upsert,
one chunk, is termed in process as before. Both make the same terms (shared/embedding/bm25.py
`documents_terms`, the same code and dictionaries).

Large upserts take turns in the child, one at a time, so each one's deadline covers its own
work alone. Each refusal below is a 503 in Qdrant's shape with nothing written, and the client
(st-qdrant-memory retries nothing, a script may) can send it again:
- more than MAX_QUEUED large upserts at once: the next is refused at once rather than holding
  one of the API's threads while it waits (they also serve every agent's /retrieve);
- a child that died (killed, out of memory) is replaced once per request, and twice is a 503;
- a child that has not answered by the deadline (stopped, swapping, a pathological text) is
  killed and the upsert refused; the next large upsert starts a fresh child.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.process import BaseProcess

from api.qdrant.shape import QdrantRefusal
from shared.embedding.bm25 import Terms, documents_terms

log = logging.getLogger(__name__)

# Characters of text of one upsert termed in process: 4,000 of random Han (jieba's worst case)
# take ~100 ms there, 2,000 ~50 ms, English ~0.5 ms; a round trip to the child ~1 ms more
# than that (section 15.3).
IN_PROCESS_CHARS = 4000
CHILD_NICENESS = 10
# Large upserts running or waiting in the child at once; one more is refused (503) at once.
MAX_QUEUED = 4
# The deadline of one upsert in the child: DEADLINE_BASE seconds and one more for every
# DEADLINE_CHARS_PER_SECOND characters. The slowest text measured, random Han through jieba,
# is termed at ~18,000 characters a second; 4,000 leaves room for a busy machine, so the most
# text one upsert may hold (MEMORY_POOL_MAX_CHARS, 1,000,000 by default) has 280 s.
DEADLINE_BASE = 30.0
DEADLINE_CHARS_PER_SECOND = 4000.0
# A killed child is gone within milliseconds; bounded so that a stop can never hang on one.
CHILD_REAP_SECONDS = 5.0

MakeTerms = Callable[[list[str], str], list[Terms]]


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

    def __init__(
        self,
        in_process_chars: int | None = None,
        *,
        max_queued: int = MAX_QUEUED,
        deadline_base: float = DEADLINE_BASE,
        deadline_chars_per_second: float = DEADLINE_CHARS_PER_SECOND,
        child_terms: MakeTerms = documents_terms,  # picklable: module-level, or a partial of one
    ) -> None:
        self.in_process_chars = IN_PROCESS_CHARS if in_process_chars is None else in_process_chars
        self.max_queued = max_queued
        self.deadline_base = deadline_base
        self.deadline_chars_per_second = deadline_chars_per_second
        self.child_terms = child_terms
        self._lock = threading.Lock()
        self._turn = threading.Lock()  # one upsert in the child at a time
        self._queued = 0
        self._pool: ProcessPoolExecutor | None = None
        self._closed = False

    def in_child(self, chars: int) -> bool:
        """Whether an upsert of `chars` characters of text is termed in the child."""
        return chars > self.in_process_chars

    def terms(self, texts: Sequence[str], language: str) -> list[Terms]:
        chars = sum(len(text) for text in texts)
        if not self.in_child(chars):
            return documents_terms(list(texts), language)
        with self._lock:
            if self._queued >= self.max_queued:
                raise unavailable(
                    f"{self._queued} other large upserts are already waiting for its process"
                )
            self._queued += 1
        try:
            with self._turn:
                return self._in_child(list(texts), language, self.deadline(chars))
        finally:
            with self._lock:
                self._queued -= 1

    def deadline(self, chars: int) -> float:
        return self.deadline_base + chars / self.deadline_chars_per_second

    def _in_child(self, texts: list[str], language: str, deadline: float) -> list[Terms]:
        for _ in range(2):  # a dead child is replaced once
            pool = self._current()
            try:
                future = pool.submit(self.child_terms, texts, language)
            except RuntimeError:  # broken (BrokenProcessPool is one), or shut down by close()
                self._discard(pool)  # since _current(): the next one starts another or says why
                continue
            try:
                return future.result(timeout=deadline)
            except BrokenProcessPool:
                log.warning("the BM25 term process stopped; starting another", exc_info=True)
                self._discard(pool)
            except CancelledError:  # close() cancelled it before the child took it
                self._discard(pool)
            except FutureTimeout:
                log.error(
                    "the BM25 term process did not answer within %.0f s; killing it", deadline
                )
                self._discard(pool, kill=True)
                raise unavailable(f"its process did not answer within {deadline:.0f} s") from None
            except Exception as exc:  # raised in the child (out of memory there, say): no 500
                log.exception("the BM25 term process failed")
                raise unavailable(f"its process failed: {type(exc).__name__}") from exc
        raise unavailable("its process stopped twice")

    @property
    def queued(self) -> int:
        """Large upserts running or waiting in the child now."""
        return self._queued

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

    def _discard(self, pool: ProcessPoolExecutor, *, kill: bool = False) -> list[BaseProcess]:
        """Stop using `pool`; with `kill`, end its children, busy or not. Returns them."""
        with self._lock:
            if self._pool is pool:
                self._pool = None
        # The executor's own dict (shutdown drops the attribute, not the dict): a child that a
        # racing submit() starts is in it, and none starts once shutdown has returned (both
        # hold the executor's shutdown lock).
        processes = getattr(pool, "_processes", None) or {}
        pool.shutdown(wait=False, cancel_futures=True)
        children = list(processes.values())
        if kill:
            # ProcessPoolExecutor has no public way to end a busy worker before Python 3.14's
            # kill_workers(); SIGKILL also ends a stopped (SIGSTOP) process.
            for process in children:
                process.kill()
        return children

    @property
    def started(self) -> bool:
        return self._pool is not None

    def close(self) -> None:
        """Ends the child (the app's shutdown), busy or not: an upsert still waiting for it is
        answered 503, nothing written, as are later large upserts."""
        with self._lock:
            self._closed = True
            pool = self._pool
        if pool is not None:
            # shutdown(wait=False) leaves the reaping to the executor's thread: joined here,
            # so the stop returns with the killed children gone (bounded: a stop never hangs).
            for child in self._discard(pool, kill=True):
                child.join(CHILD_REAP_SECONDS)

"""The query's dense vector and BM25 terms, cached by text, with a bound on how many are made at
once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from cachetools import TTLCache

from shared.embedding.bm25 import Terms, query_terms
from shared.embedding.embedder import Embedder
from shared.errors import InputRejected, RecallTimeout
from shared.ops import metrics


class RecallBusy(RecallTimeout):
    """Every query-embedding slot stayed taken for the whole wait: answer now, without memories."""

    code = "recall_busy"


class QueryCache:
    """Query embeddings by text: clients often ask the same text again within seconds.

    At most `concurrency` queries are embedded, or their BM25 terms made, at once. A recall
    abandoned at its timeout still holds its slot until its embedding returns, so new queries
    wait at most `wait` seconds for a slot and then fail fast, instead of piling up behind slow
    work.
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        size: int = 2048,
        ttl: float = 600.0,
        concurrency: int = 4,
        wait: float = 1.0,
    ) -> None:
        self.embedder = embedder
        self._cache: TTLCache[str, list[float]] = TTLCache(maxsize=size, ttl=ttl)
        # the query's BM25 terms, by (language, text): in-process and cheap, cached beside it
        self._terms: TTLCache[tuple[str, str], Terms] = TTLCache(maxsize=size, ttl=ttl)
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(concurrency)
        self._concurrency = concurrency
        self._wait = wait

    @contextmanager
    def _slot(self) -> Iterator[None]:
        if not self._slots.acquire(timeout=self._wait):
            raise RecallBusy(
                f"{self._concurrency} queries are already being embedded or termed; answer without "
                "memories (MEMORY_POOL_RECALL_CONCURRENCY)"
            )
        try:
            yield
        finally:
            self._slots.release()

    def vector(self, text: str) -> list[float]:
        with self._lock:
            cached = self._cache.get(text)
        if cached is not None:
            metrics.QUERY_CACHE.labels("hit").inc()
            return cached
        metrics.QUERY_CACHE.labels("miss").inc()
        with self._slot():
            (vector,) = self.embedder.embed([text])
        if isinstance(vector, InputRejected):
            raise vector
        with self._lock:
            self._cache[text] = vector
        return vector

    def terms(self, text: str, language: str) -> Terms:
        key = (language, text)
        with self._lock:
            cached = self._terms.get(key)
        if cached is None:
            # in the API's process, and a Chinese query's jieba words hold its GIL (~0.3 s for
            # 8,000 Han): under the same slots as the embeddings, so few are made at once
            with self._slot():
                cached = query_terms(text, language)
            with self._lock:
                self._terms[key] = cached
        return cached

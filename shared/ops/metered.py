"""Metrics from outside: the embedder's and the store's calls timed and counted where the
process builds them (shared/runtime.py), without touching their code.

A flush task opens a `FlushCauses` (workers/metrics.py); failures seen here while it runs are
noted in it, so the task can count its retries by cause from the outside too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

import openai

from shared.embedding.embedder import Embedded, Embedder
from shared.errors import CollectionMissing, InputRejected, UpstreamUnavailable
from shared.ops import metrics
from shared.store.interface import PointToWrite, Store

T = TypeVar("T")


@dataclass
class FlushCauses:
    """Why calls failed during one flush task, in order."""

    seen: list[str] = field(default_factory=list)


_causes: ContextVar[FlushCauses | None] = ContextVar("memory_pool_flush_causes", default=None)


@contextmanager
def collecting_causes() -> Iterator[FlushCauses]:
    causes = FlushCauses()
    token = _causes.set(causes)
    try:
        yield causes
    finally:
        _causes.reset(token)


def _note(cause: str) -> None:
    causes = _causes.get()
    if causes is not None:
        causes.seen.append(cause)


def embedding_status(error: BaseException) -> str:
    """The HTTP status behind an embedding failure (the embedder chains the client's error),
    else what kind of failure it was."""
    cause = error.__cause__
    if isinstance(cause, openai.APIStatusError):
        return str(cause.status_code)
    if isinstance(cause, openai.APITimeoutError):
        return "timeout"
    if isinstance(cause, openai.APIConnectionError):
        return "unreachable"
    return "error"


def _embedding_failed(error: UpstreamUnavailable) -> None:
    status = embedding_status(error)
    metrics.EMBED_ERRORS.labels(status).inc()
    _note("embedding_rate_limited" if status == "429" else "embedding_unavailable")


def instrument_embedder(embedder: Embedder) -> Embedder:
    """Time and count `embed`, and count the failures of `dimensions` (a new collection's first
    request); the embedder is otherwise unchanged."""
    inner, size = embedder.embed, embedder.dimensions

    def dimensions() -> int:
        try:
            return size()
        except UpstreamUnavailable as exc:
            _embedding_failed(exc)
            raise

    def embed(texts: Sequence[str], **options: Any) -> list[Embedded]:
        # options: the local model's `after_others` (shared/embedding/embedder.py)
        started = time.perf_counter()
        try:
            result = inner(texts, **options)
        except UpstreamUnavailable as exc:
            _embedding_failed(exc)
            raise
        finally:
            metrics.EMBED_SECONDS.observe(time.perf_counter() - started)
            metrics.EMBED_INPUTS.observe(len(texts))
        rejected = sum(1 for item in result if isinstance(item, InputRejected))
        if rejected:
            metrics.EMBED_REJECTED.inc(rejected)
        return result

    embedder.embed = embed  # type: ignore[method-assign]
    embedder.dimensions = dimensions  # type: ignore[method-assign]
    return embedder


def _timed(operation: str, call: Callable[..., T]) -> Callable[..., T]:
    seconds = metrics.QDRANT_SECONDS.labels(operation)

    def timed(*args: Any, **kwargs: Any) -> T:
        started = time.perf_counter()
        try:
            return call(*args, **kwargs)
        except Exception as exc:
            metrics.QDRANT_ERRORS.labels(operation, type(exc).__name__).inc()
            if operation != "query":  # a flush's write or take-back: why it retries
                missing = isinstance(exc, CollectionMissing)
                _note("collection_missing" if missing else "qdrant_unavailable")
            raise
        finally:
            seconds.observe(time.perf_counter() - started)

    return timed


def instrument_store(store: Store) -> Store:
    """Time and count upserts, queries and deletes (a flush taking back points it never
    committed); the store is otherwise unchanged."""
    upsert = _timed("upsert", store.upsert)

    def counted_upsert(name: str, points: Sequence[PointToWrite]) -> None:
        upsert(name, points)
        metrics.QDRANT_POINTS.inc(len(points))

    store.upsert = counted_upsert  # type: ignore[method-assign]
    # every recall query, dense or hybrid: the dense one, the fused one and its cosine rescore
    store.query = _timed("query", store.query)  # type: ignore[method-assign]
    store.fused_query = _timed("query", store.fused_query)  # type: ignore[method-assign]
    store.cosines = _timed("query", store.cosines)  # type: ignore[method-assign]
    store.delete_points = _timed("delete", store.delete_points)  # type: ignore[method-assign]
    return store

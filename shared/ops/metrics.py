"""Every Prometheus metric memory-pool exports, named in one place (README lists them).

Conventions: the `memory_pool_` prefix, `_total` counters, `_seconds` histograms, base units.
Labels stay low-cardinality: agent and source pass through `BoundedLabel`, the others take
values from fixed sets (outcomes, reasons, HTTP statuses, operations). Never a channel, user,
message or conversation id. The backlog is read from Redis at scrape time (shared/state/backlog.py).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable
from typing import TypeVar, cast

from prometheus_client import Counter, Histogram, disable_created_metrics
from prometheus_client.metrics import MetricWrapperBase

# No `_created` series beside every counter and histogram: half the samples, no dashboard use.
disable_created_metrics()

OTHER = "other"
# Seconds: /save and Qdrant answer in milliseconds, an embedding batch may take seconds.
FAST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SLOW_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
COUNT_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)


_Metric = TypeVar("_Metric", bound=MetricWrapperBase)


def child(metric: _Metric, *values: str) -> _Metric:
    """`metric.labels(*values)`, remembered: the hot paths (every request) skip its checks and
    lock. Label values are bounded, so the cache holds every series this process has."""
    return cast(_Metric, _labelled(metric, *values))


@functools.lru_cache(maxsize=4096)
def _labelled(metric: MetricWrapperBase, *values: str) -> MetricWrapperBase:
    return metric.labels(*values)


class BoundedLabel:
    """A label whose values are the fixed ones plus at most `cap` others, first come first
    named; everything past that is "other". Per process: the bound holds whatever clients send."""

    def __init__(self, fixed: Iterable[str] = (), cap: int = 20) -> None:
        self._fixed = frozenset(fixed)
        self._cap = cap
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        if value in self._fixed or value in self._seen:
            return value
        with self._lock:
            if len(self._seen) < self._cap:
                self._seen.add(value)
                return value
        return OTHER


# --- HTTP (api/metrics.py) ---------------------------------------------------------------------
HTTP_REQUESTS = Counter(
    "memory_pool_http_requests_total",
    "HTTP requests answered, by route template and status code.",
    ["endpoint", "method", "status"],
)
HTTP_SECONDS = Histogram(
    "memory_pool_http_request_duration_seconds",
    "Time to answer an HTTP request, by route template.",
    ["endpoint"],
    buckets=FAST_BUCKETS,
)

# --- /save --------------------------------------------------------------------------------------
SAVE_REQUESTS = Counter(
    "memory_pool_save_requests_total",
    "/save requests that reached their agent, by outcome (accepted, held).",
    ["agent", "source", "outcome"],
)
SAVE_MESSAGES = Counter(
    "memory_pool_save_messages_total",
    "Messages sent to /save, by outcome: accepted, duplicate, skipped, refused, held.",
    ["agent", "source", "outcome"],
)
SAVE_REFUSALS = Counter(
    "memory_pool_save_refused_messages_total",
    "Messages /save refused one by one (inside its 202), by reason: the field that could not "
    "be stored (invalid_ts, invalid_message_id, invalid_user_id, ...).",
    ["agent", "source", "reason"],
)

# --- /retrieve ----------------------------------------------------------------------------------
RETRIEVE_SECONDS = Histogram(
    "memory_pool_retrieve_duration_seconds",
    "Time to answer /retrieve (query embedding, Qdrant queries, formatting), by outcome.",
    ["agent", "outcome"],
    buckets=FAST_BUCKETS,
)
RETRIEVE_HITS = Counter("memory_pool_retrieve_hits_total", "Hits /retrieve returned.", ["agent"])
QUERY_CACHE = Counter(
    "memory_pool_retrieve_query_cache_total",
    "Query embeddings looked up in the API's cache, by result (hit, miss).",
    ["result"],
)

# --- flushes (workers/metrics.py reads each task's FlushReport) -------------------------------
FLUSH_SECONDS = Histogram(
    "memory_pool_flush_duration_seconds",
    "Time one flush task took (a batch of claimed conversations).",
    buckets=SLOW_BUCKETS,
)
FLUSH_TASKS = Counter(
    "memory_pool_flush_tasks_total", "Flush tasks run, by outcome (ok, error).", ["outcome"]
)
FLUSH_CONVERSATIONS = Counter(
    "memory_pool_flush_conversations_total", "Conversations a flush committed."
)
FLUSH_CHUNKS = Counter(
    "memory_pool_flush_chunks_written_total", "Chunks flushes wrote and committed."
)
FLUSH_RETRIES = Counter(
    "memory_pool_flush_retries_total",
    "Conversations a flush gave back to retry later, by cause (embedding_rate_limited, "
    "embedding_unavailable, qdrant_unavailable, collection_missing, other).",
    ["cause"],
)
FLUSH_QUARANTINED = Counter(
    "memory_pool_flush_quarantined_total",
    "Conversations a flush set aside in the quarantine (a failure retrying cannot fix).",
)
FLUSH_DEAD_LETTERS = Counter(
    "memory_pool_flush_dead_letters_total", "Chunks flushes moved to the dead letters."
)

# --- embeddings (shared/ops/metered.py) ----------------------------------------------------------
EMBED_SECONDS = Histogram(
    "memory_pool_embedding_request_duration_seconds",
    "Time one embedding request took (a flush batch or a query; the client splits batches over "
    "MEMORY_POOL_EMBEDDING_BATCH_SIZE), errors included.",
    buckets=SLOW_BUCKETS,
)
EMBED_INPUTS = Histogram(
    "memory_pool_embedding_request_inputs",
    "Texts in one embedding request.",
    buckets=COUNT_BUCKETS,
)
EMBED_ERRORS = Counter(
    "memory_pool_embedding_errors_total",
    "Embedding requests that failed, by HTTP status (429 is rate limiting) or timeout, "
    "unreachable, error.",
    ["status"],
)
EMBED_REJECTED = Counter(
    "memory_pool_embedding_inputs_rejected_total",
    "Inputs the embedding provider refused for good (content policy, length).",
)

# --- Qdrant (shared/ops/metered.py) --------------------------------------------------------------
QDRANT_SECONDS = Histogram(
    "memory_pool_qdrant_request_duration_seconds",
    "Time a Qdrant upsert or query took, errors included.",
    ["operation"],
    buckets=FAST_BUCKETS,
)
QDRANT_ERRORS = Counter(
    "memory_pool_qdrant_errors_total",
    "Qdrant upserts and queries that failed, by operation and error.",
    ["operation", "error"],
)
QDRANT_POINTS = Counter("memory_pool_qdrant_points_upserted_total", "Points upserted to Qdrant.")

# --- the scheduler (workers/metrics.py) ---------------------------------------------------------
SCHEDULER_TICKS = Counter(
    "memory_pool_scheduler_ticks_total", "Scheduler sweeps, by outcome (ok, error).", ["outcome"]
)
SCHEDULER_CLAIMED = Counter(
    "memory_pool_scheduler_claimed_conversations_total",
    "Due conversations the scheduler claimed and handed to the workers.",
)
SCHEDULER_SECONDS = Histogram(
    "memory_pool_scheduler_tick_duration_seconds", "Time one sweep took.", buckets=FAST_BUCKETS
)

CHUNKS_REWRITTEN = Counter(
    "memory_pool_chunks_rewritten_total",
    "Stored chunks written again (or deleted, emptied) because a message in them was edited "
    "(reason=edit) or deleted (reason=delete).",
    ["reason"],
)


def record_rewrites(reason: str, chunks: int) -> None:
    if chunks:
        CHUNKS_REWRITTEN.labels(reason).inc(chunks)


# --- hooks for work on other branches (documented; wired when they land) -------------------------
# Hybrid recall (#10): the backfill task adds the points it gave a sparse vector. What is still
# missing per collection is a Qdrant count, so it is reported by /health, not at scrape time.
BACKFILL_POINTS = Counter(
    "memory_pool_backfill_points_total",
    "Points the BM25 backfill gave a sparse vector (wired by the backfill task).",
)


def record_backfill(points: int) -> None:
    """Hook for the BM25 backfill: call with each batch's size once it is written."""
    BACKFILL_POINTS.inc(points)

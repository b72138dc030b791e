"""Worker and scheduler metrics, observed from outside: the flush task's timing and FlushReport,
retries by the cause its embedder and store calls saw (shared/ops/metered.py), the sweep's ticks."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from prometheus_client import Counter, Histogram

from shared.ops import metrics
from shared.ops.metered import FlushCauses, collecting_causes
from workers.flush import FlushReport
from workers.scheduler import Scheduler


@dataclass
class FlushWatch:
    """Handed to the task shell: it puts the flush's report here."""

    causes: FlushCauses
    report: FlushReport | None = None


def retry_cause(causes: FlushCauses) -> str:
    """The cause a flush's retries are counted under: the last failure it saw (a flush retries
    after the call that failed, so that call is the reason), else "other"."""
    return causes.seen[-1] if causes.seen else "other"


@contextmanager
def timed(outcomes: Counter, seconds: Histogram) -> Iterator[None]:
    """Time the block into `seconds` and count it under "ok" or "error" in `outcomes`."""
    started = time.perf_counter()
    try:
        yield
    except BaseException:
        outcomes.labels("error").inc()
        raise
    finally:
        seconds.observe(time.perf_counter() - started)
    outcomes.labels("ok").inc()


@contextmanager
def watched_flush() -> Iterator[FlushWatch]:
    """Time one flush task and count what its report says."""
    with collecting_causes() as causes, timed(metrics.FLUSH_TASKS, metrics.FLUSH_SECONDS):
        watch = FlushWatch(causes)
        yield watch
    report = watch.report
    if report is None:
        return
    metrics.FLUSH_CONVERSATIONS.inc(report.conversations)
    metrics.FLUSH_CHUNKS.inc(report.chunks_written)
    metrics.FLUSH_DEAD_LETTERS.inc(report.dead_letters)
    metrics.FLUSH_QUARANTINED.inc(report.quarantined)
    if report.retried:
        metrics.FLUSH_RETRIES.labels(retry_cause(causes)).inc(report.retried)


def meter_scheduler(scheduler: Scheduler) -> Scheduler:
    """Time and count each sweep of this scheduler; it is otherwise unchanged."""
    tick = scheduler.tick

    def metered_tick() -> int:
        with timed(metrics.SCHEDULER_TICKS, metrics.SCHEDULER_SECONDS):
            handed = tick()
        metrics.SCHEDULER_CLAIMED.inc(handed)
        return handed

    scheduler.tick = metered_tick  # type: ignore[method-assign]
    return scheduler

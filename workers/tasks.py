"""The Celery tasks: thin shells that validate their payload and call a plain function."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from celery import Celery, Task

from shared.errors import DimensionMismatch, ModelMismatch, UpstreamUnavailable
from shared.ops import log_context, metrics
from shared.state.buffers import Claim
from shared.state.dead_letters import DeadLetters
from shared.state.edits import PendingEdits
from shared.state.keys import BACKFILL_QUEUED, NAMES, edits_queued
from shared.state.text import as_text
from workers.backfill import agents_to_backfill, backfill
from workers.contracts import BACKFILL_TASK, EDITS_TASK, FLUSH_TASK, REPLAY_TASK, FlushTask
from workers.edits import apply_edits
from workers.flush import flush
from workers.isolation import BLOCKED_RETRY_SECONDS
from workers.metrics import watched_flush
from workers.replay import replay

if TYPE_CHECKING:
    from workers.worker_context import WorkerContext

log = logging.getLogger(__name__)

EDITS_RETRY_SECONDS = 5  # an outage pauses an agent's edits this long between tries


def register_tasks(app: Celery, context: WorkerContext) -> None:
    @app.task(name=FLUSH_TASK, ignore_result=True, shared=False, bind=True)
    def flush_conversations(self: Task, payload: dict) -> dict:
        task = FlushTask.model_validate(payload)
        claims = [Claim(c.conversation, c.token) for c in task.claims]
        with log_context.bound(task_id=self.request.id), watched_flush() as watch:
            report = watch.report = flush(claims, context.deps())
        log.debug("flushed %s", report)
        return {"chunks_written": report.chunks_written, "retried": report.retried}

    @app.task(name=REPLAY_TASK, ignore_result=True, shared=False, bind=True)
    def replay_dead_letters(self: Task) -> dict:
        deps = context.deps()
        client = deps.buffers.redis
        with log_context.bound(task_id=self.request.id):
            report = replay(
                client=client,
                agents=deps.agents,
                dead=DeadLetters(client),
                embedder=deps.embedder,
                store=deps.store,
                collections=deps.collections,
                lease=context.settings.task_time_limit,
            )
        return {"stored": report.stored, "refused": report.refused, "dropped": report.dropped}

    @app.task(name=BACKFILL_TASK, ignore_result=True, shared=False)
    def backfill_bm25() -> dict:
        deps = context.deps()
        client = deps.buffers.redis
        client.delete(BACKFILL_QUEUED)  # the scheduler may queue the next one
        seen = [as_text(name) for name in client.hvals(NAMES)]
        report = backfill(
            agents_to_backfill(deps.agents, seen),
            store=deps.store,
            collections=deps.collections,
            client=client,
        )
        if report.points:
            metrics.record_backfill(report.points)
            log.info("BM25 backfill: %d points in %s", report.points, report.collections)
        return {"points": report.points, "finished": report.finished}

    _register_edits(app, context)


def _register_edits(app: Celery, context: WorkerContext) -> None:
    @app.task(name=EDITS_TASK, ignore_result=True, shared=False, bind=True)
    def apply_agent_edits(self: Task, collection: str) -> dict:
        deps = context.deps()
        client = deps.buffers.redis
        with log_context.bound(task_id=self.request.id):
            try:
                report = apply_edits(collection, deps, PendingEdits(client))
            except (UpstreamUnavailable, DimensionMismatch, ModelMismatch) as exc:
                # tried again once the pause is over (the scheduler sees the key gone); a
                # collection of another model is looked at again every minute, as flushes do
                pause = EDITS_RETRY_SECONDS
                if not isinstance(exc, UpstreamUnavailable):
                    pause = int(BLOCKED_RETRY_SECONDS)
                log.warning("edits of %s wait %ds: %s", collection, pause, exc)
                client.set(edits_queued(collection), 1, ex=pause)
                return {"rewritten": 0, "left": -1}
        client.delete(edits_queued(collection))
        return {"rewritten": report.rewritten, "stale": report.stale, "left": report.left}

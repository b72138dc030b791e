"""The Celery tasks: thin shells that validate their payload and call a plain function."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from celery import Celery, Task

from shared.ops import log_context, metrics
from shared.state.buffers import Claim
from shared.state.dead_letters import DeadLetters
from shared.state.keys import BACKFILL_QUEUED, NAMES
from shared.state.text import as_text
from workers.backfill import agents_to_backfill, backfill
from workers.contracts import BACKFILL_TASK, FLUSH_TASK, REPLAY_TASK, FlushTask
from workers.flush import flush
from workers.metrics import watched_flush
from workers.replay import replay

if TYPE_CHECKING:
    from workers.worker_context import WorkerContext

log = logging.getLogger(__name__)


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

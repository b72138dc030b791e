"""The Celery tasks: thin shells that validate their payload and call a plain function."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from celery import Celery

from shared.buffers import Claim
from shared.contracts import FLUSH_TASK, FlushTask
from workers.flush import flush

if TYPE_CHECKING:
    from workers.worker_context import WorkerContext

log = logging.getLogger(__name__)


def register_tasks(app: Celery, context: WorkerContext) -> None:
    @app.task(name=FLUSH_TASK, ignore_result=True)
    def flush_conversations(payload: dict) -> dict:
        task = FlushTask.model_validate(payload)
        claims = [Claim(c.conversation, c.token) for c in task.claims]
        report = flush(claims, context.deps())
        log.debug("flushed %s", report)
        return {"chunks_written": report.chunks_written, "retried": report.retried}

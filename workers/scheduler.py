"""The sweep: hands due conversations (new chunks, idle ones, expired leases) to the workers."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from shared.buffers import Buffers, Claim
from shared.contracts import FlushTask

log = logging.getLogger(__name__)

Send = Callable[[FlushTask], None]


class Scheduler:
    """Claims due conversations and enqueues one flush task per batch of them.

    Exactly one runs per deployment (its claims are atomic, so a second one would be safe,
    only wasteful). /save never enqueues: it only marks conversations due in Redis.
    """

    def __init__(
        self, buffers: Buffers, send: Send, *, interval: float, batch: int, per_tick: int = 512
    ) -> None:
        self.buffers = buffers
        self.send = send
        self.interval = interval
        self.batch = batch
        self.per_tick = per_tick
        self._stop = threading.Event()

    def tick(self) -> int:
        """One sweep; returns how many conversations were handed out."""
        claims = self.buffers.claim_due(self.per_tick)
        for start in range(0, len(claims), self.batch):
            self.send(_task(claims[start : start + self.batch]))
        return len(claims)

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                handed = self.tick()
            except Exception:  # keep sweeping through Redis restarts; the next tick retries
                log.exception("scheduler tick failed")
                handed = 0
            if handed < self.per_tick:
                self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()


def _task(claims: list[Claim]) -> FlushTask:
    return FlushTask.model_validate(
        {"claims": [{"conversation": c.conversation, "token": c.token} for c in claims]}
    )


def celery_sender(app: object) -> Send:
    """Send flush tasks through a Celery app."""
    from shared.contracts import FLUSH_TASK

    def send(task: FlushTask) -> None:
        app.send_task(FLUSH_TASK, args=[task.model_dump()])  # type: ignore[attr-defined]

    return send

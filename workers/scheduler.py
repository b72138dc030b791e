"""The sweep: hands due conversations (new chunks, idle ones, expired leases) to the workers."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from celery import Celery

from shared.settings import Settings
from shared.state.buffers import Buffers, Claim
from shared.state.dead_letters import DeadLetters
from shared.state.edits import PendingEdits
from shared.state.keys import BACKFILL_QUEUED, edits_queued
from workers.contracts import BACKFILL_TASK, EDITS_TASK, FLUSH_TASK, REPLAY_TASK, FlushTask

log = logging.getLogger(__name__)

Send = Callable[[FlushTask], None]
SendReplay = Callable[[], None]
SendEdits = Callable[[str], None]

REPLAY_EVERY_SECONDS = 1.0
# The BM25 backfill (workers/backfill.py) finds st-qdrant-memory's new points within this.
BACKFILL_EVERY_SECONDS = 5.0
BACKFILL_QUEUED_SECONDS = 60  # a lost task (worker killed) stops blocking the next after this
EDITS_QUEUED_SECONDS = 60  # the same for an agent's edit task
# Emptied records outlive their dedupe marks by at most this (shared/state/edits.py).
EMPTIED_SWEEP_SECONDS = 10.0


class Scheduler:
    """Claims due conversations and enqueues one flush task per batch of them.

    Exactly one runs per deployment (its claims are atomic, so a second one would be safe,
    only wasteful). /save never enqueues: it only marks conversations due in Redis.
    """

    def __init__(
        self,
        buffers: Buffers,
        send: Send,
        *,
        interval: float,
        batch: int,
        per_tick: int = 512,
        send_replay: SendReplay | None = None,
        send_backfill: SendReplay | None = None,
        backfill_every: float = BACKFILL_EVERY_SECONDS,
        send_edits: SendEdits | None = None,
    ) -> None:
        self.buffers = buffers
        self.send = send
        self.send_replay = send_replay
        self._dead = DeadLetters(buffers.redis)
        self._last_replay = 0.0
        self.send_backfill = send_backfill
        self.backfill_every = backfill_every
        self._last_backfill = 0.0
        self.send_edits = send_edits
        self._edits = PendingEdits(buffers.redis)
        self._last_sweep = 0.0
        self.interval = interval
        self.batch = batch
        self.per_tick = per_tick
        self._stop = threading.Event()

    def tick(self) -> int:
        """One sweep; returns how many conversations were handed out."""
        claims = self.buffers.claim_due(self.per_tick)
        for start in range(0, len(claims), self.batch):
            self.send(_task(claims[start : start + self.batch]))
        self._maybe_replay()
        self._maybe_backfill()
        self._queue_edits()
        self._maybe_sweep_emptied()
        return len(claims)

    def _maybe_sweep_emptied(self) -> None:
        """The emptied records of expired ids go now and then (Redis 7.0 has no field TTL)."""
        now = time.monotonic()
        if now - self._last_sweep < EMPTIED_SWEEP_SECONDS:
            return
        self._last_sweep = now
        gone = self._edits.sweep_emptied()
        if gone:
            log.info("%d emptied messages forgotten with their expired dedupe marks", gone)

    def _queue_edits(self) -> None:
        """One edit task per agent with edits waiting, never a second while one is queued."""
        if self.send_edits is None:
            return
        for collection in self._edits.collections():
            if self.buffers.redis.set(
                edits_queued(collection), 1, nx=True, ex=EDITS_QUEUED_SECONDS
            ):
                self.send_edits(collection)

    def _maybe_backfill(self) -> None:
        """One backfill task now and then; it does a few seconds of work and stops."""
        now = time.monotonic()
        if self.send_backfill is None or now - self._last_backfill < self.backfill_every:
            return
        self._last_backfill = now
        # one waiting at a time: busy workers must not find a pile of them afterwards
        if self.buffers.redis.set(BACKFILL_QUEUED, 1, nx=True, ex=BACKFILL_QUEUED_SECONDS):
            self.send_backfill()

    def _maybe_replay(self) -> None:
        """Dead letters queued for replay get a task now and then, never a flood of them."""
        now = time.monotonic()
        if self.send_replay is None or now - self._last_replay < REPLAY_EVERY_SECONDS:
            return
        self._last_replay = now
        if self._dead.pending_replays():
            self.send_replay()

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


def celery_sender(app: Celery) -> Send:
    """Send flush tasks through a Celery app."""

    def send(task: FlushTask) -> None:
        app.send_task(FLUSH_TASK, args=[task.model_dump()])

    return send


def celery_replay_sender(app: Celery, task: str = REPLAY_TASK) -> SendReplay:
    def send() -> None:
        app.send_task(task)

    return send


def celery_scheduler(buffers: Buffers, app: Celery, settings: Settings) -> Scheduler:
    """The scheduler of a deployment, sending its tasks through `app`."""
    return Scheduler(
        buffers,
        celery_sender(app),
        interval=settings.scheduler_interval_seconds,
        batch=settings.flush_batch_conversations,
        send_replay=celery_replay_sender(app),
        send_backfill=celery_replay_sender(app, BACKFILL_TASK),
        backfill_every=settings.backfill_interval_seconds,
        send_edits=celery_edits_sender(app),
    )


def celery_edits_sender(app: Celery) -> SendEdits:
    def send(collection: str) -> None:
        app.send_task(EDITS_TASK, args=[collection])

    return send

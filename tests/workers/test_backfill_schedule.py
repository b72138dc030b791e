"""The scheduler sends the BM25 backfill task now and then, one waiting at a time."""

from __future__ import annotations

import redis

from shared.state.buffers import Buffers
from shared.state.keys import BACKFILL_QUEUED
from tests.support.redis_server import RedisServer
from workers.scheduler import Scheduler


def test_one_backfill_task_waits_at_a_time(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    sent: list[str] = []
    scheduler = Scheduler(
        Buffers(client, dedupe_ttl_seconds=60, lease_seconds=60),
        lambda task: None,
        interval=0.01,
        batch=8,
        send_backfill=lambda: sent.append("backfill"),
        backfill_every=0.0,
    )
    for _ in range(5):
        scheduler.tick()
    assert sent == ["backfill"]  # the first is still queued
    client.delete(BACKFILL_QUEUED)  # a worker took it (workers/tasks.py)
    scheduler.tick()
    assert sent == ["backfill", "backfill"]
    assert 0 < client.ttl(BACKFILL_QUEUED) <= 60  # a lost task blocks the next for a minute
    client.close()

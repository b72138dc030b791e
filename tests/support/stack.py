"""The whole service in one test process: API, a real Celery worker thread and the scheduler."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celery.contrib.testing.worker import start_worker
from fastapi.testclient import TestClient

from api.app import create_app
from shared.agents import Agents
from shared.runtime import Runtime
from shared.settings import Settings
from workers.celery_app import make_celery
from workers.scheduler import celery_scheduler
from workers.worker_context import WorkerContext


def stack_settings(redis_url: str, embedding_url: str, data_dir: Path, **extra: Any) -> Settings:
    values: dict[str, Any] = {
        "REDIS_URL": redis_url,
        "EMBEDDING_PROVIDER": "openai",
        "EMBEDDING_BASE_URL": embedding_url,
        "OPENAI_API_KEY": "test-key",
        "EMBEDDING_MODEL": "text-embedding-3-small",
        "MEMORY_POOL_DATA_DIR": str(data_dir),
        "MEMORY_POOL_SCHEDULER_INTERVAL": 0.05,
    }
    values.update(extra)
    return Settings(**values)


@dataclass
class Stack:
    settings: Settings
    runtime: Runtime
    client: TestClient

    def save(self, body: dict[str, Any]) -> dict[str, Any]:
        response = self.client.post("/save", json=body)
        assert response.status_code == 202, response.text
        return response.json()

    def flush(self, bot: str) -> dict[str, Any]:
        response = self.client.post(f"/agents/{bot}/flush", params={"wait": "true"})
        assert response.status_code == 200, response.text
        assert response.json()["done"], response.json()
        return response.json()

    def wait_idle(self, timeout: float = 20.0) -> None:
        """Until nothing is due before the idle timer: every closed chunk is written."""
        deadline = time.monotonic() + timeout
        client = self.runtime.redis
        while time.monotonic() < deadline:
            due = client.zrangebyscore("mp:due", "-inf", int(time.time() * 1000))
            if not due and not client.llen("celery"):
                return
            time.sleep(0.05)
        raise AssertionError("the write path did not settle")

    def payloads(self, collection: str) -> list[dict[str, Any]]:
        return [payload for _, payload in self.runtime.store.scroll_payloads(collection)]


# Celery keeps a worker's app in process-wide state: a task thread of one worker finds "the
# current app" through the default app, which the last started worker set
# (celery.app.trace.trace_task_ret), and stopping one test worker sets the global
# `state.should_terminate` that every worker in the process obeys. Two stacks at once in one
# process therefore run each other's tasks against the wrong Redis and Qdrant (seen: a flush
# never done and a worker that did not stop in 60 s, under the full suite only).
_running = threading.Lock()


@contextmanager
def running_stack(settings: Settings, agents: Agents) -> Iterator[Stack]:
    """API (TestClient), one Celery worker with 2 threads, and the scheduler, sharing one
    store. One at a time per process: a second one while another runs is refused."""
    if not _running.acquire(blocking=False):
        raise RuntimeError(
            "a stack is already running in this process; Celery cannot run two test workers "
            "of different apps side by side (end the other stack first)"
        )
    try:
        with _one_stack(settings, agents) as stack:
            yield stack
    finally:
        _running.release()


@contextmanager
def _one_stack(settings: Settings, agents: Agents) -> Iterator[Stack]:
    runtime = Runtime.build(settings, agents=agents)
    celery_app = make_celery(settings, WorkerContext(settings, runtime=runtime))
    scheduler = celery_scheduler(runtime.buffers, celery_app, settings)
    sweeper = threading.Thread(target=scheduler.run, name="scheduler", daemon=True)
    try:
        # A flush or backfill still running under a loaded machine must be let finish: a
        # worker left running after a shutdown timeout keeps the next stack's from starting.
        with start_worker(
            celery_app,
            pool="threads",
            concurrency=2,
            perform_ping_check=False,
            loglevel="WARNING",
            shutdown_timeout=60,
        ):
            sweeper.start()
            with TestClient(create_app(settings, runtime=runtime)) as client:
                yield Stack(settings, runtime, client)
            scheduler.stop()
            sweeper.join(timeout=5)
    finally:
        scheduler.stop()
        runtime.close()

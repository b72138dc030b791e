"""The Celery application: broker settings chosen to agree with memory-pool's own leases."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from celery import Celery
from celery.signals import worker_process_init

from shared.embedding import chinese
from shared.settings import Settings
from workers.tasks import register_tasks
from workers.worker_context import WorkerContext


def celery_broker_url(redis_url: str) -> str:
    """redis-py names a unix socket unix://PATH; kombu, Celery's transport, redis+socket://PATH."""
    if redis_url.startswith("unix://"):
        return "redis+socket://" + redis_url.removeprefix("unix://")
    return redis_url


def make_celery(settings: Settings, context: WorkerContext | None = None) -> Celery:
    """The Celery app for these settings, with the flush task bound to a worker context."""
    if not settings.redis_url:
        raise ValueError("REDIS_URL is not set: Celery needs Redis as its broker")
    app = Celery("memory_pool", broker=celery_broker_url(settings.redis_url), set_as_current=False)
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        # A task is acknowledged when done, and put back if its worker dies; memory-pool's
        # leases make a second run of the same claim a no-op, so redelivery is always safe.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        # Hard limit below the lease: a stalled flush is killed before its lease can expire
        # and another worker take the conversation, so it never overwrites newer work.
        task_time_limit=settings.task_time_limit,
        task_soft_time_limit=settings.task_soft_time_limit,
        # Recovery is the sweep's job (within a lease); Celery only must not redeliver a task
        # that is still running, so its visibility timeout just has to exceed the hard limit.
        broker_transport_options={"visibility_timeout": int(settings.lease_seconds * 5)},
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
    )
    register_tasks(app, context or WorkerContext(settings))
    return app


def warm_chinese_words(languages: Iterable[str], pool: str) -> threading.Thread | None:
    """Load jieba's dictionary at a worker's start if an agent's language cuts Chinese words:
    now for a threads or solo pool, in each child after its fork for prefork (a thread forked
    in the middle of the load would leave its lock held in the child for ever)."""
    wanted = frozenset(languages)
    if pool != "prefork":
        return chinese.warm_in_background(wanted)
    if chinese.needed(wanted):
        worker_process_init.connect(_warm_in_child(wanted), weak=False)
    return None


def _warm_in_child(languages: frozenset[str]) -> Any:
    def warm(**_: Any) -> None:
        chinese.warm_in_background(languages)

    return warm

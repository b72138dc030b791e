"""`memory-pool serve`: the API, a Celery worker, the scheduler and Redis in one process."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from contextlib import ExitStack
from types import FrameType

from celery import Celery
from celery.worker import state as worker_state

from api.app import create_app
from memory_pool.embedded_redis import EmbeddedRedis
from memory_pool.http_server import HttpServer
from shared.runtime import Runtime
from shared.settings import Settings
from shared.store.edge.engine import EdgeStore
from shared.store.migration import MigrationFailed, migrate_local_mode
from workers.celery_app import make_celery
from workers.metrics import meter_scheduler
from workers.scheduler import celery_scheduler
from workers.worker_context import WorkerContext

log = logging.getLogger("memory_pool.serve")

WORKER_THREADS = 2
WORKER_START_TIMEOUT = 30.0
THREAD_STOP_TIMEOUT = 5.0
INTERRUPTED = 130


class ServeError(RuntimeError):
    """memory-pool serve cannot start; the message says why."""


class InProcessWorker:
    """A Celery worker with a thread pool, run in a daemon thread of this process.

    The flushes must run here: an embedded Qdrant Edge shard is opened by one process only.
    """

    def __init__(self, app: Celery, *, concurrency: int = WORKER_THREADS) -> None:
        self._app = app
        self._concurrency = concurrency
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = WORKER_START_TIMEOUT) -> None:
        # The thread pool runs each task through `current_app`, which in a pool thread is the
        # process's default app (as celery.contrib.testing.worker sets it up too).
        self._app.set_default()
        controller = self._app.WorkController(
            pool="threads",
            concurrency=self._concurrency,
            hostname=f"serve-{os.getpid()}@{socket.gethostname()}",
            loglevel="INFO",
            ready_callback=lambda _consumer: self._ready.set(),
            # one worker in one process: nothing to synchronise with or report to
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
        )
        self._thread = threading.Thread(target=controller.start, name="celery-worker", daemon=True)
        self._thread.start()
        waited = 0.0
        while not self._ready.wait(0.1):
            waited += 0.1
            if not self._thread.is_alive() or waited > timeout:
                raise ServeError("the Celery worker did not start (its log above says why)")

    def stop(self, timeout: float) -> None:
        """Warm stop: take no new tasks and let the running flushes finish."""
        if self._thread is None:
            return
        # The flag Celery's own SIGTERM handler sets; the worker's loop checks it every turn.
        worker_state.should_stop = 0
        self._thread.join(timeout)
        if self._thread.is_alive():
            # Its task stays unacknowledged in Redis and runs again at the next start; the
            # leases make that second run safe.
            log.warning("a flush still runs after %.0f s; leaving it to the next start", timeout)
        self._thread = None


def run_in_one_process(settings: Settings, *, host: str, port: int) -> int:
    """Run until SIGINT or SIGTERM, then stop in order; the exit code."""
    # Until HTTP serves, SIGTERM unwinds the start like Ctrl-C does.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with ExitStack() as stack:
            settings = _with_redis(settings, stack)
            runtime = _open_runtime(settings, stack)
            _log_setup(settings, runtime)
            _start_background(settings, runtime, stack)
            app = create_app(settings, runtime=runtime)
            # uvicorn takes SIGINT/SIGTERM while it serves and re-raises them once it stopped;
            # from then on the orderly stop below is under way and a signal only says so.
            _quiet_stop_signals()
            HttpServer(app, host, port).run()
            log.info("HTTP stopped; stopping the scheduler, the worker, then Redis")
    except KeyboardInterrupt:
        log.info("interrupted while starting; stopped")
        return INTERRUPTED
    log.info("memory-pool stopped; open chunks wait in Redis for the next start")
    return 0


def _with_redis(settings: Settings, stack: ExitStack) -> Settings:
    if settings.redis_url:
        log.info("Redis: REDIS_URL")
        return settings
    embedded = stack.enter_context(EmbeddedRedis(settings.data_dir))
    return settings.model_copy(update={"redis_url": embedded.url})


def _open_runtime(settings: Settings, stack: ExitStack) -> Runtime:
    try:
        runtime = Runtime.build(settings)
    except RuntimeError as exc:  # a data folder another process holds
        raise ServeError(f"cannot open the embedded Qdrant storage: {exc}") from exc
    stack.callback(runtime.close)
    if isinstance(runtime.store, EdgeStore):
        try:
            migrate_local_mode(settings.data_dir, runtime.store, runtime.agents.language_of)
        except MigrationFailed as exc:
            raise ServeError(f"cannot migrate the previous version's data: {exc}") from exc
    return runtime


def _start_background(settings: Settings, runtime: Runtime, stack: ExitStack) -> None:
    """The worker, then the scheduler that feeds it; the stack stops them in reverse."""
    celery_app = make_celery(settings, WorkerContext(settings, runtime=runtime))
    # one in-process worker: nobody to send remote-control commands to it
    celery_app.conf.worker_enable_remote_control = False
    worker = InProcessWorker(celery_app)
    # registered first: a worker that fails to become ready is still asked to stop
    stack.callback(worker.stop, timeout=settings.task_time_limit + THREAD_STOP_TIMEOUT)
    worker.start()
    scheduler = meter_scheduler(celery_scheduler(runtime.buffers, celery_app, settings))
    sweeper = threading.Thread(target=scheduler.run, name="scheduler", daemon=True)
    sweeper.start()
    stack.callback(sweeper.join, THREAD_STOP_TIMEOUT)
    stack.callback(scheduler.stop)


def _log_setup(settings: Settings, runtime: Runtime) -> None:
    if settings.qdrant_url:
        log.info("Qdrant: QDRANT_URL")
    else:
        log.info("Qdrant: embedded (Qdrant Edge) in %s", settings.data_dir.absolute() / "edge")
    log.warning(
        "a collection keeps the embedding model it was created with for life: after changing "
        "EMBEDDING_PROVIDER, EMBEDDING_MODEL or EMBEDDING_DIMENSIONS its agent's messages stay "
        "buffered and /health says why"
    )
    # Finding the vector size may load or download a model: off the main thread, so HTTP
    # starts at once (/save only buffers) and Ctrl-C is never swallowed by a download retry.
    threading.Thread(
        target=_log_embedding, args=(settings, runtime), name="embedding-probe", daemon=True
    ).start()
    if settings.config_path is None:
        log.info(
            "no agents file: any agent name is accepted. To list agents (speakers, "
            "collections, chunk sizes) pass --config or set MEMORY_POOL_CONFIG to a YAML or "
            "TOML file (README, 'The agents file')"
        )
    else:
        log.info("agents file %s: %d agents", settings.config_path, len(runtime.agents.listed))


def _log_embedding(settings: Settings, runtime: Runtime) -> None:
    try:
        size = str(runtime.embedder.dimensions())
    except Exception as exc:  # not fatal: messages wait in Redis until the model answers
        log.warning("the embedding model does not answer yet: %s", exc)
        size = "unknown until it answers"
    log.info(
        "embeddings: provider %s, model %s, vector size %s",
        settings.embedding_provider, runtime.embedder.model, size,
    )  # fmt: skip


def _quiet_stop_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _already_stopping)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _already_stopping(signum: int, frame: FrameType | None) -> None:
    log.info("stopping: running flushes finish, then Redis writes its file and stops")

"""A daemon thread that posts queued saves in order, so Hermes never waits for memory-pool;
and how the plugin starts its threads."""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

MAX_PENDING = 100
_STOP = object()


def _host_spawn() -> Callable[..., Any] | None:
    """Hermes' `spawn_context_thread` (agent.memory_provider, newer releases), else None."""
    try:
        from agent import memory_provider
    except ImportError:
        return None
    spawn = getattr(memory_provider, "spawn_context_thread", None)
    return spawn if callable(spawn) else None


def spawn_thread(target: Callable[[], object], name: str) -> threading.Thread:
    """Start a daemon thread running `target`, through the host's `spawn_context_thread` where
    it has one (so the work runs in the caller's profile: its Hermes home and secrets), else a
    plain thread run in a copy of the caller's context variables (0.19.0's Hermes-home
    override lives in one)."""
    spawn = _host_spawn()
    if spawn is not None:
        try:
            thread = spawn(target, name=name, daemon=True)
            if thread.ident is None:  # not started yet (the host's helper only builds it)
                thread.start()
            return thread
        except Exception:
            logger.debug("memory-pool: spawn_context_thread failed; a plain thread", exc_info=True)
    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(target,), name=name, daemon=True)
    thread.start()
    return thread


class Sender:
    """submit() never blocks and never raises; failures are logged (once per outage)."""

    def __init__(self, send: Callable[[Any], object], *, max_pending: int = MAX_PENDING) -> None:
        self._send = send
        self._max_pending = max_pending
        self._queue: queue.Queue[Any] = queue.Queue()  # bounded by submit(), so _STOP always fits
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._failing = False

    def submit(self, item: Any) -> bool:
        """Queue one item; False when closed or when the backlog is full (the item is dropped)."""
        with self._lock:
            if self._closed:
                return False
            if self._queue.qsize() >= self._max_pending:
                logger.warning("memory-pool: %d saves waiting; dropping one", self._max_pending)
                return False
            self._queue.put(item)
            if self._thread is None:
                self._thread = spawn_thread(self._run, "memory-pool-sync")
            return True

    def close(self, timeout: float) -> bool:
        """Stop taking items and give the queued ones `timeout` seconds; True if all went."""
        with self._lock:
            self._closed = True
            thread = self._thread
            if thread is None:
                return True
            self._queue.put(_STOP)
        thread.join(timeout)
        if thread.is_alive():
            logger.warning("memory-pool: %d saves left unsent at shutdown", self._queue.qsize())
            return False
        return True

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            try:
                self._send(item)
            except Exception as exc:
                self._report(exc)
            else:
                if self._failing:
                    logger.info("memory-pool: saving works again")
                self._failing = False

    def _report(self, exc: Exception) -> None:
        if not self._failing:
            logger.warning("memory-pool: save failed (the turn is re-sent with the next): %s", exc)
        else:
            logger.debug("memory-pool: save failed again: %s", exc)
        self._failing = True

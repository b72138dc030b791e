"""A worker process's clients and flush dependencies, built on first use and kept."""

from __future__ import annotations

import threading

from shared.agents import Agents
from shared.runtime import Runtime
from shared.settings import Settings
from workers.flush import FlushDeps


class WorkerContext:
    """Builds the flush dependencies lazily, so forked pool processes get their own clients."""

    def __init__(self, settings: Settings, *, runtime: Runtime | None = None,
                 agents: Agents | None = None) -> None:  # fmt: skip
        self.settings = settings
        self._runtime = runtime
        self._agents = agents
        self._deps: FlushDeps | None = None
        self._lock = threading.Lock()

    def deps(self) -> FlushDeps:
        with self._lock:
            if self._deps is None:
                runtime = self._runtime or Runtime.build(self.settings, agents=self._agents)
                self._runtime = runtime
                self._deps = FlushDeps.of(runtime)
            return self._deps

"""The API's metrics: HTTP requests by route, /save and /retrieve outcomes, /metrics itself."""

from __future__ import annotations

import time

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from starlette.types import Message, Receive, Scope, Send

from api.ingest import Ingest
from api.middleware import HttpMiddleware
from shared.agents import Agents
from shared.ops import metrics
from shared.ops.metrics import child
from shared.runtime import Runtime
from shared.settings import Settings
from shared.state.backlog import BacklogCollector
from shared.state.buffers import SaveCounts

# Sources the known clients send; others count against the cap like unlisted agents.
KNOWN_SOURCES = ("discord", "sillytavern", "hermes")
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class ApiMeters:
    """What the routes count, with the agent and source labels bounded."""

    def __init__(self, settings: Settings, agents: Agents) -> None:
        cap = settings.metrics_max_label_values
        self.agent = metrics.BoundedLabel((a.name for a in agents.listed), cap)
        self.source = metrics.BoundedLabel((*KNOWN_SOURCES, settings.default_source), cap)

    def saved(self, agent: str, source: str, counts: SaveCounts, result: Ingest) -> None:
        labels = (self.agent(agent), self.source(source))
        child(metrics.SAVE_REQUESTS, *labels, "accepted").inc()
        for outcome, count in (
            ("accepted", counts.accepted),
            ("duplicate", counts.duplicates),
            ("edited", counts.edited),
            ("stale", counts.stale),
            ("skipped", counts.skipped),
            ("refused", len(result.refusals)),
        ):
            if count:
                child(metrics.SAVE_MESSAGES, *labels, outcome).inc(count)
        for refusal in result.refusals:
            child(metrics.SAVE_REFUSALS, *labels, f"invalid_{refusal.field}").inc()

    def edits(self, agent: str, source: str, counts: SaveCounts) -> None:
        """An explicit edit (PATCH): counted with /save's messages, by what it did."""
        labels = (self.agent(agent), self.source(source))
        for outcome, count in (("edited", counts.edited), ("stale", counts.stale)):
            if count:
                child(metrics.SAVE_MESSAGES, *labels, outcome).inc(count)

    def held(self, agent: str, source: str, messages: int) -> None:
        """The agent's writes are held (409): nothing of the request was buffered."""
        labels = (self.agent(agent), self.source(source))
        child(metrics.SAVE_REQUESTS, *labels, "held").inc()
        child(metrics.SAVE_MESSAGES, *labels, "held").inc(messages)

    def retrieved(self, agent: str, outcome: str, started: float, hits: int = 0) -> None:
        label = self.agent(agent)
        seconds = time.perf_counter() - started
        child(metrics.RETRIEVE_SECONDS, label, outcome).observe(seconds)
        if hits:
            child(metrics.RETRIEVE_HITS, label).inc(hits)


def backlog_registry(runtime: Runtime, meters: ApiMeters) -> CollectorRegistry:
    """The app's own registry: the backlog collector reads this runtime's Redis."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BacklogCollector(runtime.redis, meters.agent))
    return registry


def exposition(app_registry: CollectorRegistry) -> bytes:
    """The process's metrics, then the backlog; run off the event loop (it reads Redis)."""
    return generate_latest(REGISTRY) + generate_latest(app_registry)


class HttpMetrics(HttpMiddleware):
    """Counts and times every answer by route template (never the raw path: it holds ids),
    including the door's refusals, which never reach a route."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        status = {"code": 500}

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            route = scope.get("route")
            endpoint = getattr(route, "path", None) or "other"
            # Any token is a method to HTTP: only the standard ones become label values.
            method = scope["method"] if scope["method"] in METHODS else "other"
            child(metrics.HTTP_REQUESTS, endpoint, method, str(status["code"])).inc()
            child(metrics.HTTP_SECONDS, endpoint).observe(time.perf_counter() - started)

"""Assembles the FastAPI application: routers, the MCP server, error handlers and the process
runtime."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from api.agent_threads import AgentShares
from api.cors import Cors
from api.errors import install_error_handlers
from api.mcp.mount import install_mcp
from api.metrics import ApiMeters, HttpMetrics, backlog_registry
from api.middleware import install_door
from api.openai_compat.service import EmbeddingSlots
from api.qdrant import routes as qdrant
from api.qdrant.term_pool import TermPool
from api.recall.lexical import LexicalCollections
from api.recall.query_cache import QueryCache
from api.request_id import RequestId
from api.routes import (
    agents,
    dead_letters,
    edits,
    embeddings,
    memories,
    metrics,
    operations,
    pool_transfer,
    quarantine,
    retrieve,
    save,
    ui,
)
from api.save_body import document_save_body
from shared.embedding import chinese
from shared.runtime import Runtime, async_redis_client
from shared.settings import Settings
from shared.state.agent_names import AgentNames
from shared.state.buffers import AsyncSaver


def create_app(settings: Settings, *, runtime: Runtime | None = None) -> FastAPI:
    """The app for these settings; a given runtime is used as is and not closed by the app."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = runtime is None
        app.state.runtime = runtime or Runtime.build(settings)
        _start_embedding(app)
        app.state.saver = AsyncSaver(
            async_redis_client(app.state.runtime.settings),
            dedupe_ttl_seconds=app.state.runtime.settings.dedupe_ttl_seconds,
        )
        app.state.names = AgentNames(app.state.saver.redis, app.state.runtime.agents)
        _start_metrics(app, settings)
        try:
            async with app.state.mcp.running():  # the MCP server's sessions (api/mcp)
                yield
        finally:
            await app.state.saver.close()
            app.state.term_pool.close()
            if owned:
                app.state.runtime.close()

    logging.getLogger("memory_pool").setLevel(logging.INFO)
    app = FastAPI(
        title="memory-pool",
        summary="One long-term memory for an AI character across all its interfaces.",
        version="0.1.0",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    install_door(app, settings)
    _install_observability(app, settings)
    # Outermost: every answer to a page's request is readable by the page, the door's refusals
    # and the request-id middleware's 500 too (a bare network error tells the page nothing).
    app.add_middleware(Cors, origins=settings.cors_origin_names)
    _install_routes(app, settings)
    return app


def _install_routes(app: FastAPI, settings: Settings) -> None:
    """/save first: a request is matched against the routes in order, and it is the firehose."""
    app.include_router(save.router)
    document_save_body(app)
    app.include_router(retrieve.router)
    app.include_router(operations.router)
    app.include_router(agents.router)
    app.include_router(dead_letters.router)
    app.include_router(memories.router)
    app.include_router(edits.router)
    app.include_router(ui.router)
    app.include_router(quarantine.router)
    app.include_router(pool_transfer.router)
    app.include_router(embeddings.router)
    app.state.mcp = install_mcp(app, settings.max_body_bytes)
    app.include_router(qdrant.router)  # last: its catch-all answers every other /qdrant path


def _start_embedding(app: FastAPI) -> None:
    """What embeds for requests: /retrieve's cached queries and lexical terms, and the slots of
    /v1/embeddings, apart from /retrieve's."""
    runtime: Runtime = app.state.runtime
    app.state.query_cache = QueryCache(
        runtime.embedder,
        concurrency=runtime.settings.recall_concurrency,
        wait=runtime.settings.recall_queue_seconds,
    )
    app.state.lexical = LexicalCollections(runtime.store)
    app.state.term_pool = TermPool()  # a large /qdrant upsert's terms, in a child process
    app.state.agent_shares = AgentShares.of(runtime.settings.agent_threads)
    # jieba's dictionary (seconds) loads beside the start; a recall before it is done waits
    chinese.warm_in_background(runtime.agents.languages())
    app.state.embedding_slots = EmbeddingSlots(
        runtime.settings.embeddings_concurrency, wait=runtime.settings.embedding_timeout_seconds
    )


def _start_metrics(app: FastAPI, settings: Settings) -> None:
    """The routes' meters and the backlog's registry, or None when metrics are off."""
    runtime: Runtime = app.state.runtime
    app.state.meters = ApiMeters(settings, runtime.agents) if settings.metrics_enabled else None
    if app.state.meters is not None:
        app.state.metrics_registry = backlog_registry(runtime, app.state.meters)


def _install_observability(app: FastAPI, settings: Settings) -> None:
    """Outside the door, so its refusals are counted and carry a request id too."""
    if settings.metrics_enabled:
        app.add_middleware(HttpMetrics)
        app.include_router(metrics.router)
    app.add_middleware(RequestId)  # around the door and the app: every line has the request id

"""The uvicorn server of `memory-pool api` and `memory-pool serve`, configured in one place."""

from __future__ import annotations

import asyncio
import socket

import uvicorn
from fastapi import FastAPI

# Open requests (a /flush?wait=true) get this long to finish once a stop is asked for; then
# uvicorn cancels them and runs the app's shutdown.
HTTP_GRACE_SECONDS = 10


class HttpServer(uvicorn.Server):
    """uvicorn's server that ends the app's BM25 term process as soon as a stop is asked for:
    a large /qdrant upsert waiting for a hung one would otherwise hold the stop for its whole
    deadline, or past the grace be cut off by uvicorn with a 500. Its waiters are answered 503
    in Qdrant's shape, nothing written (api/qdrant/term_pool.py)."""

    def __init__(self, app: FastAPI, host: str, port: int) -> None:
        super().__init__(http_config(app, host, port))
        self.app = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        pool = getattr(self.app.state, "term_pool", None)
        if pool is not None:
            await asyncio.to_thread(pool.close)  # it joins the ended child: not on the loop
        await super().shutdown(sockets)


def http_config(app: FastAPI, host: str, port: int) -> uvicorn.Config:
    # log_config=None: uvicorn's lines go through the process's one logging configuration.
    return uvicorn.Config(
        app, host=host, port=port, log_level="info", log_config=None,
        timeout_graceful_shutdown=HTTP_GRACE_SECONDS,
    )  # fmt: skip

"""Bench-only server: memory-pool's app plus /noop and /naive, run as `memory-pool api` runs it."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

import uvicorn
from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool

from api.app import create_app
from api.save_body import save_body
from api.schemas import SaveRequest
from shared.settings import Settings
from workers.celery_app import make_celery

NAIVE_TASK = "bench.naive_message"
NAIVE_QUEUE = "bench_naive"


def build(settings: Settings) -> FastAPI:
    app = create_app(settings)
    celery = make_celery(settings)

    @app.post("/noop", status_code=202)
    async def noop(request: Request) -> dict[str, int]:
        """Same body parsing as /save (api/save_body.py), no work: the cost floor of this server
        and client."""
        await save_body(request)
        return {"accepted": 0, "duplicates": 0, "skipped": 0}

    def enqueue_each(body: SaveRequest) -> int:
        for message in body.messages:
            args = [body.bot, json.loads(message.model_dump_json())]
            celery.send_task(NAIVE_TASK, args=args, queue=NAIVE_QUEUE)
        return len(body.messages)

    @app.post("/naive", status_code=202)
    async def naive(request: Request) -> dict[str, int]:
        """The naive design: one Celery task per received message, dedupe left to the worker."""
        body = await save_body(request)
        sent = await run_in_threadpool(enqueue_each, body)
        return {"accepted": sent, "duplicates": 0, "skipped": 0}

    return app


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The same uvicorn call as `memory-pool api` (memory_pool/main.py), access log included.
    uvicorn.run(build(Settings()), host="127.0.0.1", port=args.port, log_level="info")
    return 0


if __name__ == "__main__":
    sys.exit(main())

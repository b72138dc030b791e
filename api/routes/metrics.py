"""GET /metrics: Prometheus' text format; with API keys, only for a key valid for every agent."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.concurrency import run_in_threadpool

from api.deps import GlobalAccess, metrics_registry
from api.metrics import exposition

router = APIRouter()


# Not in the OpenAPI schema: it is for Prometheus, not for API clients.
@router.get("/metrics", dependencies=[GlobalAccess], include_in_schema=False)
async def metrics(request: Request) -> Response:
    """Every metric of this process, and the backlog read from Redis now."""
    body = await run_in_threadpool(exposition, metrics_registry(request))
    return Response(body, media_type=CONTENT_TYPE_LATEST)

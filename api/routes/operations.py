"""Operations endpoints: /health and flushing an agent's open chunks on demand."""

from __future__ import annotations

import asyncio
import time

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from api.auth import check_global_access
from api.deps import AgentCallsDep, AgentDep, RuntimeDep
from api.health import health_report
from api.schemas import AGENT_ACCESS, FlushResponse, HealthResponse, HealthStatus, error_docs
from shared.errors import Forbidden, Unauthorized
from shared.runtime import Runtime

router = APIRouter()

FLUSH_POLL_SECONDS = 0.1


def _full_report_allowed(runtime: Runtime, request: Request) -> bool:
    """No keys configured, or a key valid for every agent: agent names and counts may show."""
    try:
        check_global_access(runtime.agents, request.headers)
    except (Unauthorized, Forbidden):
        return False
    return True


@router.get(
    "/health",
    response_model=HealthResponse | HealthStatus,
    responses=error_docs(e401="A presented API key is not valid."),
)
async def health(runtime: RuntimeDep, request: Request) -> HealthResponse | HealthStatus:
    """Redis, Qdrant and the embedding provider; each agent's collection; the backlog. Once
    API keys exist, only `status` unless the key is valid for every agent."""
    report = await run_in_threadpool(health_report, runtime)
    if not _full_report_allowed(runtime, request):
        return HealthStatus(status=report["status"])
    return HealthResponse.model_validate(report)


@router.post(
    "/agents/{bot}/flush",
    response_model=FlushResponse,
    responses=AGENT_ACCESS,
)
async def flush_agent(
    agent: AgentDep,
    runtime: RuntimeDep,
    run: AgentCallsDep,
    wait: bool = Query(False, description="Answer only once every open chunk is stored."),
    timeout: float = Query(30.0, gt=0, le=300, description="How long `wait` may take, seconds."),
) -> FlushResponse:
    """Write every open chunk of the agent now, without closing it."""
    conversations = await run(runtime.buffers.force_flush, agent.collection_name)
    pending, held = await run(_unwritten, runtime, conversations)
    deadline = time.monotonic() + timeout
    while wait and pending and time.monotonic() < deadline:
        await asyncio.sleep(FLUSH_POLL_SECONDS)
        pending, held = await run(_unwritten, runtime, conversations)
    return FlushResponse(
        conversations=len(conversations),
        pending=pending,
        quarantined=held,
        done=pending == 0 and held == 0,
    )


def _unwritten(runtime: Runtime, conversations: list[str]) -> tuple[int, int]:
    """(pending, quarantined): a quarantined conversation waits for a release, not for a
    flush, so a caller is told about it instead of waiting on it."""
    quarantined = {member for member, _ in runtime.quarantine.members()}
    held = [c for c in conversations if c in quarantined]
    writable = [c for c in conversations if c not in quarantined]
    return runtime.buffers.unwritten(writable), len(held)

"""The memory viewer's reads and single-point deletes: browse an agent's chunks, read one,
preview and delete, chunks per day. The page at /ui uses these; so does client/."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from starlette.concurrency import run_in_threadpool

from api.deps import AgentCallsDep, AgentDep, RuntimeDep
from api.memory_schemas import (
    BROWSE_ERRORS,
    POINT_ERRORS,
    AgentList,
    DayCount,
    DeletePreviewResponse,
    Memory,
    MemoryPage,
    Timeline,
    memory_view,
)
from api.routes.agents import DeleteRequest, DeleteResponse
from api.schemas import EpochMs, FilterId, SourceFilter, error_docs
from api.visible_agents import visible_agents
from shared.agents import AgentConfig
from shared.errors import PointNotFound
from shared.format.payload import utc_date
from shared.memories.deletes import DeleteScope, delete, preview
from shared.runtime import Runtime
from shared.store.browse import DAY_MS
from shared.store.memory_query import Cursor, MemoryFilters, memory_filter, normal_point_id

router = APIRouter()
agent_router = APIRouter(prefix="/agents/{bot}")

# A UUID in any form uuid.UUID reads, or an unsigned integer: the two kinds of Qdrant ids.
POINT_ID = r"^([0-9]{1,20}|\{?[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}\}?)$"
PointId = Annotated[str, Path(pattern=POINT_ID, description="The point id (a UUID).")]


@router.get(
    "/agents",
    response_model=AgentList,
    responses=error_docs(e401="A presented API key is not valid."),
)
async def list_agents(runtime: RuntimeDep, request: Request) -> AgentList:
    """The agents this request may reach (by the same rules as every agent endpoint)."""
    return await run_in_threadpool(visible_agents, runtime, request.headers)


@agent_router.get("/memories", response_model=MemoryPage, responses=BROWSE_ERRORS)
async def browse(
    agent: AgentDep,
    runtime: RuntimeDep,
    run: AgentCallsDep,
    source: Annotated[SourceFilter | None, Query(description="Only this interface.")] = None,
    channel_id: Annotated[FilterId | None, Query(description="Only this channel.")] = None,
    guild_id: Annotated[FilterId | None, Query(description="Only this guild.")] = None,
    conversation_id: Annotated[FilterId | None, Query(description="Only this one.")] = None,
    user_id: Annotated[FilterId | None, Query(description="Chunks this person speaks in.")] = None,
    since: Annotated[EpochMs | None, Query(description="Oldest message at or after.")] = None,
    until: Annotated[EpochMs | None, Query(description="Oldest message at or before.")] = None,
    limit: Annotated[int, Query(ge=1, le=200, description="Page size.")] = 50,
    cursor: Annotated[str | None, Query(max_length=200, description="From `next_cursor`.")] = None,
) -> MemoryPage:
    """The agent's chunks, newest first, one page at a time (chunks without a timestamp are
    not listed)."""
    filters = MemoryFilters(source, channel_id, guild_id, conversation_id, user_id, since, until)
    after = Cursor.decode(cursor) if cursor is not None else None
    page, following = await run(
        runtime.store.newest_page,
        agent.collection_name, memory_filter(filters), limit=limit, after=after,
    )  # fmt: skip
    return MemoryPage(
        memories=[memory_view(point_id, payload) for point_id, payload in page],
        next_cursor=following.encode() if following else None,
    )


def _point(runtime: Runtime, agent: AgentConfig, point_id: str) -> tuple[str, dict]:
    normal = normal_point_id(point_id)
    payload = runtime.store.point(agent.collection_name, normal) if normal else None
    if normal is None or payload is None:
        raise PointNotFound(f"no point {point_id!r} in collection {agent.collection_name!r}")
    return normal, payload


@agent_router.get("/memories/{point_id}", response_model=Memory, responses=POINT_ERRORS)
async def read_memory(
    point_id: PointId, agent: AgentDep, runtime: RuntimeDep, run: AgentCallsDep
) -> Memory:
    """One chunk of the agent's collection."""
    return memory_view(*await run(_point, runtime, agent, point_id))


def _delete_point(
    runtime: Runtime, agent: AgentConfig, point_id: str, dry_run: bool
) -> DeleteResponse | DeletePreviewResponse:
    normal, _ = _point(runtime, agent, point_id)
    scope = DeleteScope(point_id=normal)
    if dry_run:
        return DeletePreviewResponse(**asdict(preview(runtime, agent, scope)))
    return DeleteResponse.of(delete(runtime, agent, scope))


@agent_router.delete(
    "/memories/{point_id}",
    response_model=DeleteResponse | DeletePreviewResponse,
    responses=POINT_ERRORS,
)
async def delete_memory(
    point_id: PointId,
    agent: AgentDep,
    runtime: RuntimeDep,
    run: AgentCallsDep,
    dry_run: Annotated[bool, Query(description="Only count what would go.")] = False,
) -> DeleteResponse | DeletePreviewResponse:
    """Delete one chunk; every message id it held is tombstoned, so a re-send never stores it
    again, and its messages still buffered go too. st-qdrant-memory may write its own
    points again: it writes to Qdrant itself."""
    return await run(_delete_point, runtime, agent, point_id, dry_run)


@agent_router.post(
    "/delete/preview",
    response_model=DeletePreviewResponse,
    responses=BROWSE_ERRORS | error_docs(e422="Not exactly one scope, or an unstorable id."),
)
async def preview_delete(
    body: DeleteRequest, agent: AgentDep, runtime: RuntimeDep, run: AgentCallsDep
) -> DeletePreviewResponse:
    """How many points POST /agents/{bot}/delete would remove with this body; changes nothing."""
    found = await run(preview, runtime, agent, DeleteScope(**body.model_dump()))
    return DeletePreviewResponse(**asdict(found))


def _timeline(runtime: Runtime, agent: AgentConfig, days: int) -> Timeline:
    today = int(time.time() * 1000) // DAY_MS * DAY_MS
    start = today - (days - 1) * DAY_MS
    counts = runtime.store.daily_counts(agent.collection_name, start_ms=start, days=days)
    return Timeline(
        days=[
            DayCount(
                date=utc_date(start + i * DAY_MS),
                by_source={k: v for k, v in sorted(day.items()) if k},
                without_source=day.get("", 0),
            )
            for i, day in enumerate(counts)
        ]
    )


@agent_router.get("/timeline", response_model=Timeline, responses=BROWSE_ERRORS)
async def timeline(
    agent: AgentDep,
    runtime: RuntimeDep,
    run: AgentCallsDep,
    days: Annotated[int, Query(ge=1, le=366, description="How many days, today last.")] = 30,
) -> Timeline:
    """Chunks per day (UTC, by their `timestamp`) and source."""
    return await run(_timeline, runtime, agent, days)


router.include_router(agent_router)

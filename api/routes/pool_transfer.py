"""Moving a pool over HTTP: an agent's export streamed out as JSON Lines, and an export (or a
part of one) loaded in; for a running serve, which alone may open its data folder."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

from api.agent_threads import AgentCalls
from api.auth import check_global_access
from api.deps import AgentCallsDep, AgentDep, RuntimeDep
from api.errors import error_body
from api.schemas import AGENT_ACCESS, error_docs
from shared.agents import AgentConfig
from shared.errors import InvalidInput
from shared.format.json_lines import split_lines
from shared.format.naming import collection_problem
from shared.pool.format import BadExport
from shared.pool.marks import RedisMarks, unwritten_messages
from shared.pool.transfer import TransferRefused, export_lines, import_lines
from shared.runtime import Runtime

router = APIRouter(prefix="/agents/{bot}")


class ImportResponse(BaseModel):
    collection: str = Field(description="The collection the points went into.")
    points: int = Field(description="Points written (upserted by id: an import again rewrites).")
    reembedded: int = Field(description="Of those, embedded again from their text.")
    refused: int = Field(description="Chunks the embedding model refused, or without text.")
    tombstones: int = Field(description="Deleted message ids restored (kept for ever).")
    dedupe: int = Field(description="Dedupe marks restored (the later expiry wins).")


FLUSH_POLL_SECONDS = 0.1
NDJSON = "application/x-ndjson"
# Lines an export reads from the store in one turn of a thread: a point with its vectors is up to
# about 60 KB (3,072 dimensions), so a turn holds at most a few MB.
EXPORT_LINES_AT_ONCE = 32


def _still_buffered(runtime: Runtime, agent: AgentConfig, *, writable: bool) -> int:
    """Messages not stored yet; `writable`: only those a flush can write now (a quarantined
    conversation waits for a release, so waiting for it would only run out the timeout)."""
    held: frozenset[str] = frozenset()
    if writable:
        held = frozenset(m for m, _ in runtime.quarantine.members(agent.collection_name))
    return unwritten_messages(runtime.redis, agent.collection_name, skip=held)


async def _flush_first(
    run: AgentCalls, runtime: Runtime, agent: AgentConfig, timeout: float
) -> int:
    """Asks the workers to write every open chunk and waits; the messages still buffered."""
    await run(runtime.buffers.force_flush, agent.collection_name)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not await run(_still_buffered, runtime, agent, writable=True):
            break
        await asyncio.sleep(FLUSH_POLL_SECONDS)
    return await run(_still_buffered, runtime, agent, writable=False)


def _buffered_refusal(left: int) -> JSONResponse:
    return JSONResponse(
        error_body(
            "messages_buffered",
            f"{left} messages are still buffered (a conversation in quarantine, or the "
            "embedding provider is down): fix that first, or pass force=true to move the pool "
            "without them",
        ),
        status_code=409,
    )


@router.get(
    "/export",
    responses={
        **AGENT_ACCESS,
        **error_docs(
            e404="Unknown agent, or the agent has stored nothing yet.",
            e409="Messages are still buffered after the flush (force=true moves without them).",
        ),
        200: {"content": {NDJSON: {}}, "description": "The export, one JSON object a line."},
    },
    response_class=StreamingResponse,
)
async def export_pool(
    agent: AgentDep,
    runtime: RuntimeDep,
    run: AgentCallsDep,
    vectors: bool = Query(True, description="Include the dense and BM25 vectors."),
    force: bool = Query(False, description="Export even if messages stay buffered."),
    timeout: float = Query(60.0, gt=0, le=600, description="How long the flush may take, s."),
) -> Any:
    """Writes the agent's buffered messages, then streams its collection and its tombstones
    and dedupe marks as JSON Lines (`memory-pool export --url`)."""
    left = await _flush_first(run, runtime, agent, timeout)
    if left and not force:
        return _buffered_refusal(left)
    collection = agent.collection_name
    if await run(runtime.store.collection, collection) is None:
        return JSONResponse(
            error_body("no_collection", f"agent {agent.name!r} has stored nothing yet"),
            status_code=404,
        )
    lines = export_lines(
        runtime.store,
        RedisMarks(runtime.redis),
        collection=collection,
        agent=agent.name,
        vectors=vectors,
    )
    return StreamingResponse(_in_share(run, lines), media_type=NDJSON)


async def _in_share(run: AgentCalls, lines: Iterator[str]) -> AsyncIterator[str]:
    """The export's lines, read in the agent's share of the threads: Starlette would read a
    plain iterator in its threadpool, and a burst of exports from a slow store held it all.
    A few lines a turn: a thread's turn per line cost more than the line (about 100 us)."""
    while some := await run(_next_lines, lines):
        yield "".join(some)


def _next_lines(lines: Iterator[str]) -> list[str]:
    return list(itertools.islice(lines, EXPORT_LINES_AT_ONCE))


@router.post(
    "/import",
    response_model=ImportResponse,
    responses={
        **AGENT_ACCESS,
        **error_docs(
            e400="Not a memory-pool export (the detail names the line), or a bad collection name.",
            e409="The collection holds another vector size or model.",
            e413="The body is over MEMORY_POOL_MAX_BODY_BYTES: send the export in parts.",
        ),
    },
)
async def import_pool(
    agent: AgentDep,
    runtime: RuntimeDep,
    run: AgentCallsDep,
    request: Request,
    collection: str | None = Query(None, description="Load into this collection instead."),
    part: bool = Query(False, description="The body is a part of an export (its header, then "
                       "some of its lines): the point count is checked by the caller."),
) -> ImportResponse:  # fmt: skip
    """Loads an export (JSON Lines, its header first) into the agent's collection or into
    `collection`; idempotent by point id (`memory-pool import points --url`)."""
    text = _utf8(await request.body())
    target = collection or agent.collection_name
    if target != agent.collection_name:
        # another collection may be another agent's: only a key for every agent may name one
        check_global_access(runtime.agents, request.headers)
        problem = collection_problem(target)
        if problem:
            raise InvalidInput(f"collection {target!r}: {problem}")
    try:
        # another collection's import counts against that collection's share
        moved = await replace(run, collection=target)(
            import_lines,
            split_lines([text]),  # not str.splitlines(): it splits at U+2028
            store=runtime.store,
            marks=RedisMarks(runtime.redis),
            embedder=runtime.embedder,
            collection=target,
            check_count=not part,
            agent=agent.name if target == agent.collection_name else None,
            language=runtime.agents.language_of(target),  # the backfill's, for this collection
        )
    except BadExport as exc:
        raise InvalidInput(f"not a memory-pool export: {exc}") from exc
    except TransferRefused as exc:
        return JSONResponse(error_body("import_refused", str(exc)), status_code=409)  # type: ignore[return-value]
    return ImportResponse.model_validate(moved, from_attributes=True)


def _utf8(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput("the body is not UTF-8 text") from exc

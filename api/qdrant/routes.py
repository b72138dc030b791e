"""The /qdrant routes: the Qdrant calls st-qdrant-memory makes (index.js 3.1.3, clients.md §4),
each one call in the threadpool (within its agent's share of threads, api/agent_threads.py) and
Qdrant's answer shape; any other path under /qdrant is 404 in Qdrant's error shape."""

from __future__ import annotations

import time
from typing import Annotated, Any, NoReturn

from fastapi import APIRouter, Path, Query, Request
from starlette.concurrency import run_in_threadpool

from api.deps import RuntimeDep
from api.deps import agent_shares as shares
from api.qdrant import collections, points
from api.qdrant.access import reachable, target
from api.qdrant.schemas import (
    CollectionInfo,
    CollectionList,
    CountRequest,
    CountResult,
    CreateCollection,
    ScoredPoint,
    ScrollRequest,
    ScrollResult,
    SearchRequest,
    UpdateResult,
    UpsertPoints,
)
from api.qdrant.shape import (
    ACCESS,
    PREFIX,
    UPSERT,
    WITH_BODY,
    Answer,
    QdrantRefusal,
    ok,
    qdrant_errors,
)
from api.qdrant.term_pool import TermPool

router = APIRouter(prefix=PREFIX, tags=["qdrant"])

Collection = Annotated[str, Path(description="The collection: an agent's (mem_<name>).")]
COLLECTION = "/collections/{collection}"
POINTS = COLLECTION + "/points"


@router.get(
    "/collections",
    response_model=Answer[CollectionList],
    responses=qdrant_errors(e401="The API key is not valid.", e503="The store is unavailable."),
)
async def list_collections(runtime: RuntimeDep, request: Request) -> dict[str, Any]:
    """The collections this request may reach (st-qdrant-memory's connection test); a key
    that is not valid never gets here (the door's 401, api/middleware.py)."""
    started = time.perf_counter()
    names = await run_in_threadpool(runtime.store.collection_names)
    found = reachable(runtime.agents, names, request.headers)
    return ok({"collections": [{"name": name} for name in found]}, started)


@router.get(COLLECTION, response_model=Answer[CollectionInfo], responses=ACCESS)
async def get_collection(
    collection: Collection, runtime: RuntimeDep, request: Request
) -> dict[str, Any]:
    """The collection as Qdrant describes it (`config.params.vectors.size`); 404 when missing."""
    started = time.perf_counter()
    found = target(runtime.agents, collection, request.headers)
    return ok(
        await shares(request).reads.run(collection, collections.info, runtime, found), started
    )


@router.put(COLLECTION, response_model=Answer[bool], responses=WITH_BODY)
async def create_collection(
    collection: Collection, body: CreateCollection, runtime: RuntimeDep, request: Request
) -> dict[str, Any]:
    """Creates the agent's collection as memory-pool creates its own; only for Cosine vectors
    of memory-pool's embedding size (400 otherwise), 409 when it exists."""
    started = time.perf_counter()
    found = target(runtime.agents, collection, request.headers)
    vectors = body.vectors
    size, distance = vectors.size, vectors.distance
    created = await shares(request).writes.run(
        collection, collections.create, runtime, found, size=size, distance=distance
    )
    return ok(created, started)


@router.delete(COLLECTION, response_model=Answer[bool], responses=ACCESS)
async def delete_collection(
    collection: Collection, runtime: RuntimeDep, request: Request
) -> dict[str, Any]:
    """SillyTavern's "Delete All Memories": deletes st-qdrant-memory's own points (those
    without a `source`); what other interfaces wrote, and the collection, stay."""
    started = time.perf_counter()
    found = target(runtime.agents, collection, request.headers)
    deleted = await shares(request).writes.run(
        collection, collections.delete_own_points, runtime, found
    )
    return ok(deleted, started)


@router.put(POINTS, response_model=Answer[UpdateResult], responses=UPSERT)
async def upsert_points(
    collection: Collection,
    body: UpsertPoints,
    runtime: RuntimeDep,
    request: Request,
    wait: Annotated[bool, Query(description="Written before the answer either way.")] = False,
) -> dict[str, Any]:
    """Writes the points with their payload as sent and BM25 terms of their `text`; a vector
    of another size than the collection's refuses the request (400), nothing written."""
    started = time.perf_counter()
    found = target(runtime.agents, collection, request.headers)
    pool: TermPool = request.app.state.term_pool  # a large upsert's terms: in a child process
    writes = shares(request).writes
    if not pool.in_child(points.text_chars(body.points)):
        result = await writes.run(
            collection, points.upsert, runtime, found, body.points, wait=wait,
            make_terms=pool.terms,
        )  # fmt: skip
    else:
        # Its terms wait for the term process, whose own queue bounds those threads for every
        # agent together (503 at once past it); only its store steps take the agent's share.
        # Queued in the share whole, a burst of one agent's large upserts kept that queue's
        # places for all of it; outside it whole, they held threads in a slow store unbounded.
        ids = await writes.run(collection, points.checked, runtime, found, body.points)
        language = found.agent.language
        terms = await run_in_threadpool(points.terms_of, body.points, language, pool.terms)
        result = await writes.run(
            collection, points.write, runtime, found, body.points, ids, terms, wait=wait
        )
    return ok(result, started)


@router.post(
    POINTS + "/search",
    response_model=Answer[list[ScoredPoint]],
    response_model_exclude_unset=True,
    responses=WITH_BODY,
)
async def search_points(
    collection: Collection, body: SearchRequest, runtime: RuntimeDep, request: Request
) -> dict[str, Any]:
    """The nearest points by cosine, at or above `score_threshold`, under the filter."""
    started = time.perf_counter()
    found = target(runtime.agents, collection, request.headers)
    return ok(
        await shares(request).reads.run(collection, points.search, runtime, found, body), started
    )


@router.post(
    POINTS + "/scroll",
    response_model=Answer[ScrollResult],
    response_model_exclude_unset=True,
    responses=WITH_BODY,
)
async def scroll_points(
    collection: Collection, body: ScrollRequest, runtime: RuntimeDep, request: Request
) -> dict[str, Any]:
    """Points in id order under the filter, a page at a time (st-qdrant-memory asks whether
    any point holds a message id: `should` of `messageIds` text matches)."""
    started = time.perf_counter()
    found = target(runtime.agents, collection, request.headers)
    return ok(
        await shares(request).reads.run(collection, points.scroll, runtime, found, body), started
    )


@router.post(POINTS + "/count", response_model=Answer[CountResult], responses=WITH_BODY)
async def count_points(
    collection: Collection, body: CountRequest, runtime: RuntimeDep, request: Request
) -> dict[str, Any]:
    """How many points the filter selects (exact)."""
    started = time.perf_counter()
    found = target(runtime.agents, collection, request.headers)
    return ok(
        await shares(request).reads.run(collection, points.count, runtime, found, body), started
    )


METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


@router.api_route("", methods=METHODS, include_in_schema=False, response_model=None)
@router.api_route("/{rest:path}", methods=METHODS, include_in_schema=False, response_model=None)
async def not_a_call(request: Request) -> NoReturn:
    """Every other path and method under /qdrant: Qdrant's error shape, never a page."""
    raise QdrantRefusal(
        404,
        f"Not found: {request.method} {request.url.path} is not a Qdrant call memory-pool "
        "answers (it answers the calls st-qdrant-memory makes)",
    )

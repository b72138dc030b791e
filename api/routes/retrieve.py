"""POST /retrieve: the most relevant past chunks and a ready-to-inject block, synchronously."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from api.deps import RuntimeDep, agent_for
from api.recall import RecallRequest, recall
from api.schemas import AGENT_ACCESS, Hit, RetrieveRequest, RetrieveResponse, error_docs
from shared.errors import RecallTimeout
from shared.recall_query import RecallFilters

router = APIRouter()

ERRORS = AGENT_ACCESS | error_docs(
    e422="Missing bot or query_text, or a bad field.",
    e503="Recall timed out, or the embedding provider or Qdrant is unavailable.",
)


def _request(body: RetrieveRequest) -> RecallRequest:
    return RecallRequest(
        query_text=body.query_text.strip(),
        excluded_ids=frozenset(body.exclude_message_ids),
        limit=body.limit,
        score_threshold=body.score_threshold,
        filters=RecallFilters(
            source=body.source,
            channel_id=body.channel_id,
            guild_id=body.guild_id,
            since=body.since,
            until=body.until,
        ),
    )


@router.post("/retrieve", response_model=RetrieveResponse, responses=ERRORS)
async def retrieve(
    body: RetrieveRequest, request: Request, runtime: RuntimeDep
) -> RetrieveResponse:
    """Find memories for `query_text`; a client waits for this, so it answers within a budget."""
    agent = agent_for(body.bot, runtime, request)
    wanted = _request(body)
    if not wanted.query_text:
        return RetrieveResponse(hits=[], formatted="")
    budget = runtime.settings.recall_timeout_seconds
    work = run_in_threadpool(
        recall, agent, wanted, store=runtime.store, cache=request.app.state.query_cache
    )
    try:
        found = await asyncio.wait_for(work, timeout=budget)
    except TimeoutError as exc:
        raise RecallTimeout(
            f"recall took longer than {budget:g} s; answer without memories"
        ) from exc
    hits = [Hit(id=h.id, score=h.score, payload=dict(h.payload)) for h in found.hits]
    return RetrieveResponse(hits=hits, formatted=found.formatted)

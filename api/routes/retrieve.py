"""POST /retrieve: the most relevant past chunks and a ready-to-inject block, synchronously."""

from __future__ import annotations

import asyncio
import time

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError

from api import deps
from api.deps import RuntimeDep, agent_for
from api.recall.query_filter import RecallFilters
from api.recall.request import Recall, RecallRequest
from api.recall.service import recall
from api.schemas import AGENT_ACCESS, Hit, RetrieveRequest, RetrieveResponse, error_docs
from shared.agents import AgentConfig
from shared.errors import MemoryPoolError, RecallTimeout
from shared.format.ids import message_id_problem, replace_surrogates
from shared.ops import log_context
from shared.runtime import Runtime
from shared.settings import Settings

router = APIRouter()

# Outcomes of a failed recall by error code (memory_pool_retrieve_duration_seconds{outcome}).
OUTCOMES = {
    "recall_timeout": "timeout",
    "recall_busy": "busy",
    "upstream_unavailable": "unavailable",
}

ERRORS = AGENT_ACCESS | error_docs(
    e422="Missing bot or query_text, a query_text over the limit, or a bad field.",
    e503="Recall timed out, or the embedding provider or Qdrant is unavailable.",
)


def _check_query(body: RetrieveRequest, settings: Settings) -> None:
    # A setting, so not a static schema bound; the same 422 shape as one.
    cap = settings.max_query_chars
    if len(body.query_text) > cap:
        raise RequestValidationError(
            [{"type": "string_too_long", "loc": ("body", "query_text"),
              "msg": f"String should have at most {cap} characters (it has "
                     f"{len(body.query_text)}; MEMORY_POOL_MAX_QUERY_CHARS)"}]
        )  # fmt: skip


def _request(body: RetrieveRequest, agent: AgentConfig) -> RecallRequest:
    # An id that cannot be stored is in no chunk, so excluding it changes nothing.
    excluded = (i for i in body.exclude_message_ids if message_id_problem(i) is None)
    return RecallRequest(
        query_text=replace_surrogates(body.query_text).strip(),
        excluded_ids=frozenset(excluded),
        limit=body.limit,
        score_threshold=body.score_threshold,
        filters=RecallFilters(
            source=body.source,
            channel_id=body.channel_id,
            guild_id=body.guild_id,
            since=body.since,
            until=body.until,
        ),
        mode=body.recall or agent.recall,
        fusion=body.fusion or agent.fusion,
        lexical_threshold=(
            agent.lexical_threshold if body.lexical_threshold is None else body.lexical_threshold
        ),
        lexical_weight=agent.lexical_weight if body.lexical_weight is None else body.lexical_weight,
        time_words=agent.time_words if body.time_words is None else body.time_words,
        now=body.now,
    )


@router.post("/retrieve", response_model=RetrieveResponse, responses=ERRORS)
async def retrieve(
    body: RetrieveRequest, request: Request, runtime: RuntimeDep
) -> RetrieveResponse:
    """Find memories for `query_text`; a client waits for this, so it answers within a budget."""
    _check_query(body, runtime.settings)
    agent = agent_for(body.bot, runtime, request)
    log_context.set_field("agent", agent.name)
    wanted = _request(body, agent)
    if not wanted.query_text:
        return RetrieveResponse(hits=[], formatted="")
    meters, started = deps.meters(request), time.perf_counter()
    try:
        found = await _recall(agent, wanted, runtime, request)
    except MemoryPoolError as exc:
        if meters is not None:
            meters.retrieved(agent.name, OUTCOMES.get(exc.code, "error"), started)
        raise
    if meters is not None:
        meters.retrieved(agent.name, "hits" if found.hits else "empty", started, len(found.hits))
    hits = [
        Hit(id=h.id, score=h.score, payload=dict(h.payload), fused_score=h.fused_score)
        for h in found.hits
    ]
    return RetrieveResponse(hits=hits, formatted=found.formatted)


async def _recall(
    agent: AgentConfig, wanted: RecallRequest, runtime: Runtime, request: Request
) -> Recall:
    budget = runtime.settings.recall_timeout_seconds
    # Within the agent's share of threads (api/agent_threads.py), its recalls apart from its
    # /qdrant calls: waiting for a turn counts in the budget, and a recall over it leaves its
    # thread working in the store, still counted, so a burst of one agent's slow recalls
    # times out its own and holds no more threads than its share.
    work = deps.agent_shares(request).recalls.run(
        agent.collection_name,
        recall,
        agent,
        wanted,
        store=runtime.store,
        cache=deps.query_cache(request),
        lexical=deps.lexical(request),
    )
    try:
        return await asyncio.wait_for(work, timeout=budget)
    except TimeoutError as exc:
        raise RecallTimeout(
            f"recall took longer than {budget:g} s; answer without memories"
        ) from exc

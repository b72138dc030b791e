"""PATCH /agents/{bot}/messages/{message_id}: an explicit edit, for clients that know when a
message changed (the viewer, client/). It does what a re-send with the new text does on
/save (README "Edits") and answers what it changed."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from api.agent_threads import AgentCalls
from api.deps import AgentCallsDep, AgentDep, RuntimeDep, saver
from api.schemas import AGENT_ACCESS, Source, StorableMessageId, error_docs
from shared.agents import AgentConfig
from shared.errors import MessageDeleted, MessageNotFound, RequestTooLarge
from shared.format.chunking import is_storable
from shared.format.fingerprint import text_fingerprint
from shared.format.flush_plan import idle_seconds
from shared.format.ids import clean_text
from shared.format.messages import stored_json
from shared.memories.known_ids import holding
from shared.ops import log_context
from shared.runtime import Runtime
from shared.state.buffers import (
    AgentRef,
    ConversationSettings,
    SaveBatches,
    SaveCounts,
    SaveMode,
)
from shared.state.conversations import ConversationRef

router = APIRouter()

ERRORS = AGENT_ACCESS | error_docs(
    e404="The agent never saw this message id (or forgot it: no chunk holds it).",
    e409="The agent's collection has another model.",
    e410="The message was deleted: a deleted id stays deleted.",
    e413="A text over MEMORY_POOL_MAX_CHARS characters (what /save takes for one message).",
    e422="A bad message id, source or text.",
    e503="Redis or Qdrant is unavailable; nothing changed.",
)

Outcome = Literal["edited", "unchanged", "emptied", "stale"]


class EditRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: Source | None = Field(
        None, description="The interface the message came through; the default source if left out."
    )
    # Its length is /save's for one message, a setting: checked by the route (413, as /save).
    text: str = Field(description="The message's new text.")


class EditResponse(BaseModel):
    message_id: str
    source: str
    outcome: Outcome = Field(
        description="edited: the memory takes the new text (a written closed chunk is written "
        "again within seconds, an open one when its conversation is next quiet); "
        "unchanged: it had this text; emptied: the new text is too short to keep, the message "
        "left its chunk; stale: its chunk cannot be rebuilt (written before edits were kept, "
        "or by st-qdrant-memory) and keeps the old text."
    )


_OUTCOMES: dict[str, Outcome] = {
    "edited": "edited", "same": "unchanged", "emptied": "emptied", "stale": "stale",
}  # fmt: skip


# `:path`: a message id may hold "/" (its %2F is decoded before routing)
@router.patch(
    "/agents/{bot}/messages/{message_id:path}", response_model=EditResponse, responses=ERRORS
)
async def edit_message(
    message_id: Annotated[StorableMessageId, Path(description="The platform message id.")],
    body: EditRequest,
    agent: AgentDep,
    runtime: RuntimeDep,
    run: AgentCallsDep,
    request: Request,
) -> EditResponse:
    """Give a message the agent saw a new text, wherever it is: still buffered, or in a
    written chunk (rewritten under the same point id, its other messages unchanged)."""
    # The agent as named: an edit stores no new message, so it records no name for the
    # collection (its identity), and a refused one changes nothing.
    log_context.set_field("agent", agent.name)
    # /save takes a message as long as its whole request may be (counted before cleaning,
    # api/ingest.py): so does an edit, refused beyond it as there.
    if len(body.text) > (limit := runtime.settings.max_chars_per_request):
        raise RequestTooLarge.of_text(len(body.text), limit, "edit")
    source = body.source or runtime.settings.default_source
    text = clean_text(body.text).strip()
    conv = _settings(agent)
    who = AgentRef(name=agent.name, collection=agent.collection_name)
    ref = ConversationRef(collection=agent.collection_name, source=source)
    counts = await saver(request).save(
        who, _edit(ref, message_id, text, agent), conv, SaveMode(edit_only=True)
    )
    outcome = counts.outcomes[0]
    if outcome == "new":
        outcome, counts = await _in_the_store(request, run, runtime, agent, ref, message_id, text)
    if outcome == "deleted":
        raise MessageDeleted(f"message {message_id!r} was deleted; it stays deleted")
    _count(request, agent.name, source, counts)
    return EditResponse(message_id=message_id, source=source, outcome=_OUTCOMES[outcome])


async def _in_the_store(
    request: Request, run: AgentCalls, runtime: Runtime, agent: AgentConfig,
    ref: ConversationRef, message_id: str, text: str,
) -> tuple[str, SaveCounts]:  # fmt: skip
    """No mark (never seen, or seen longer ago than the dedupe window): a chunk may hold it."""
    held = await run(holding, runtime.store, agent.collection_name, ref.source, message_id)
    if held is None:
        raise MessageNotFound(
            f"agent {agent.name!r} has no message {message_id!r} from {ref.source!r}"
        )
    if held.context is None:
        return "stale", SaveCounts(0, 0, stale=1)
    if held.fingerprint == text_fingerprint(text):
        return "same", SaveCounts(0, 1)
    # the new mark names the message's own conversation (an emptied one returns there)
    ref = replace(ref, conversation_id=held.context.conversation_id,
                  channel_id=held.context.channel_id)  # fmt: skip
    conv = _settings(agent)
    who = AgentRef(name=agent.name, collection=agent.collection_name)
    mode = SaveMode(edit_only=True, stored=True)
    counts = await saver(request).save(who, _edit(ref, message_id, text, agent), conv, mode)
    return counts.outcomes[0], counts


def _settings(agent: AgentConfig) -> ConversationSettings:
    return ConversationSettings(
        min_chars=agent.chunk_min_chars,
        gap_seconds=agent.chunk_gap_seconds,
        idle_seconds=idle_seconds(agent.idle_flush_seconds, idle_timer=True),
    )


def _edit(ref: ConversationRef, message_id: str, text: str, agent: AgentConfig) -> SaveBatches:
    """The save script's batch for one edit; only the text of its line is used (an edit keeps
    the first version's speaker and time)."""
    batches = SaveBatches()
    line = stored_json(message_id, text, int(time.time() * 1000), "")
    batches.batch(ref).append(message_id, line, fingerprint=text_fingerprint(text),
                              short=not is_storable(text, agent.rules))  # fmt: skip
    return batches


def _count(request: Request, agent: str, source: str, counts: SaveCounts) -> None:
    meter = request.app.state.meters
    if meter is not None:
        meter.edits(agent, source, counts)

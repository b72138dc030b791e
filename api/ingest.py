"""Turns a /save body into buffered messages: refusals, speakers, times, conversations, skips."""

from __future__ import annotations

import time
from dataclasses import dataclass

from api.schemas import Refusal, SaveMessage, SaveRequest
from shared.agents import AgentConfig
from shared.buffers import IncomingMessage
from shared.chunking import is_storable
from shared.conversations import ConversationRef
from shared.errors import RequestTooLarge
from shared.ids import (
    MAX_ID_CHARS,
    clean_text,
    id_problem,
    message_id_problem,
    one_line_name,
    shown,
)
from shared.messages import Message
from shared.naming import speaker_name
from shared.settings import Settings
from shared.timestamps import UnstorableTime, storable_timestamp

# The per-message ids besides message_id, checked by the same rule (shared/ids.py).
OTHER_IDS = ("user_id", "discord_user_id", "channel_id", "guild_id", "conversation_id")


@dataclass(frozen=True, slots=True)
class Ingest:
    incoming: list[IncomingMessage]
    skipped: int
    refusals: list[Refusal]


def check_limits(request: SaveRequest, settings: Settings) -> None:
    """Refuse a whole request over the configured size; nothing of it is stored."""
    count = len(request.messages)
    if count > settings.max_messages_per_request:
        raise RequestTooLarge(
            f"{count} messages in one request; the limit is {settings.max_messages_per_request}"
        )
    chars = sum(len(m.text or "") for m in request.messages)
    if chars > settings.max_chars_per_request:
        raise RequestTooLarge(
            f"{chars} characters of text in one request; the limit is "
            f"{settings.max_chars_per_request}"
        )


def _checked_time(index: int, item: SaveMessage, now_ms: int) -> int | Refusal:
    """The message's timestamp when it can be stored; else why it cannot."""

    def refused(field: str, problem: str) -> Refusal:
        mid = shown(item.message_id, MAX_ID_CHARS)
        return Refusal(index=index, message_id=mid, field=field, reason=f"{field} {problem}")

    problem = message_id_problem(item.message_id)
    if problem:
        return refused("message_id", problem)
    for field in OTHER_IDS:
        value = getattr(item, field)
        problem = id_problem(value) if value is not None else None
        if problem:
            return refused(field, problem)
    try:
        return storable_timestamp(item.ts, now_ms)
    except UnstorableTime as exc:
        return refused("ts", str(exc))


def _message(item: SaveMessage, agent: AgentConfig, text: str, ts: int) -> Message:
    user_id = item.user_id or item.discord_user_id
    is_self = item.speaker_kind == "self"
    speaker = speaker_name(
        is_self=is_self,
        self_speaker=agent.speaker,
        speaker_aliases=agent.speaker_aliases,
        user_id=user_id,
        given_name=one_line_name(item.speaker_name) if item.speaker_name else None,
    )
    return Message(
        id=item.message_id,
        text=text.strip(),
        ts=ts,
        speaker=speaker,
        user_id=user_id,
        is_self=is_self,
    )


def ingest(request: SaveRequest, agent: AgentConfig, source: str) -> Ingest:
    """Resolve each storable message and its conversation; count the ones too short to keep,
    and refuse, one by one, the ones that cannot be stored."""
    now_ms = int(time.time() * 1000)
    rules = agent.rules
    collection = agent.collection_name  # derived from the name: once, not per message
    conversations: dict[tuple[str | None, str | None], ConversationRef] = {}
    incoming: list[IncomingMessage] = []
    refusals: list[Refusal] = []
    skipped = 0
    for index, item in enumerate(request.messages):
        ts = _checked_time(index, item, now_ms)
        if isinstance(ts, Refusal):
            refusals.append(ts)
            continue
        text = clean_text(item.text or "")
        if not is_storable(text, rules):
            skipped += 1
            continue
        scope = (item.conversation_id, item.channel_id)
        conversation = conversations.get(scope)
        if conversation is None:  # a request's messages share one or a few conversations
            conversation = conversations[scope] = ConversationRef(
                collection=collection,
                source=source,
                conversation_id=item.conversation_id,
                channel_id=item.channel_id,
            )
        message = _message(item, agent, text, ts)
        incoming.append(IncomingMessage(conversation, message, guild_id=item.guild_id))
    return Ingest(incoming, skipped, refusals)

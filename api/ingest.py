"""Turns a /save body into buffered messages: speakers, timestamps, conversations, skips."""

from __future__ import annotations

import time
from dataclasses import dataclass

from api.schemas import SaveMessage, SaveRequest
from shared.agents import AgentConfig
from shared.buffers import IncomingMessage
from shared.chunking import is_storable
from shared.conversations import ConversationRef
from shared.errors import RequestTooLarge
from shared.messages import Message
from shared.naming import speaker_name
from shared.settings import Settings
from shared.timestamps import normalize_timestamp


@dataclass(frozen=True, slots=True)
class Ingest:
    incoming: list[IncomingMessage]
    skipped: int


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


def _message(item: SaveMessage, agent: AgentConfig, now_ms: int) -> Message:
    user_id = item.user_id or item.discord_user_id
    is_self = item.speaker_kind == "self"
    speaker = speaker_name(
        is_self=is_self,
        self_speaker=agent.speaker,
        speaker_aliases=agent.speaker_aliases,
        user_id=user_id,
        given_name=item.speaker_name,
    )
    return Message(
        id=item.message_id,
        text=(item.text or "").strip(),
        ts=normalize_timestamp(item.ts, now_ms),
        speaker=speaker,
        user_id=user_id,
        is_self=is_self,
    )


def ingest(request: SaveRequest, agent: AgentConfig, source: str) -> Ingest:
    """Resolve each storable message and its conversation; count the ones too short to keep."""
    now_ms = int(time.time() * 1000)
    rules = agent.rules
    incoming, skipped = [], 0
    for item in request.messages:
        if not is_storable(item.text or "", rules):
            skipped += 1
            continue
        conversation = ConversationRef(
            collection=agent.collection_name,
            source=source,
            conversation_id=item.conversation_id,
            channel_id=item.channel_id,
        )
        incoming.append(
            IncomingMessage(conversation, _message(item, agent, now_ms), guild_id=item.guild_id)
        )
    return Ingest(incoming, skipped)

"""Turns a /save body into buffered messages: refusals, speakers, times, conversations, skips."""

from __future__ import annotations

import time
from dataclasses import dataclass

from api.schemas import Refusal, SaveMessage, SaveRequest
from shared.agents import AgentConfig
from shared.errors import RequestTooLarge
from shared.format.chunking import is_storable
from shared.format.fingerprint import text_fingerprint
from shared.format.ids import (
    MAX_ID_CHARS,
    clean_text,
    id_problem,
    is_plain,
    message_id_problem,
    one_line_name,
    shown,
)
from shared.format.messages import stored_json
from shared.format.naming import speaker_name
from shared.format.timestamps import UnstorableTime, storable_timestamp
from shared.settings import Settings
from shared.state.buffers import ConversationBatch, SaveBatches
from shared.state.conversations import ConversationRef

# The per-message ids besides message_id, checked by the same rule (shared/format/ids.py).
OTHER_IDS = ("user_id", "discord_user_id", "channel_id", "guild_id", "conversation_id")


@dataclass(frozen=True, slots=True)
class Ingest:
    batches: SaveBatches
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


def _id_problem(item: SaveMessage) -> tuple[str, str] | None:
    """The first id of a message that cannot be stored, and why; None for nearly every one."""
    # Plain ids joined are plain: one check clears a message of snowflakes (shared/format/ids.py).
    every_id = (
        f"{item.message_id}{item.user_id or ''}{item.discord_user_id or ''}"
        f"{item.channel_id or ''}{item.guild_id or ''}{item.conversation_id or ''}"
    )
    if item.message_id and is_plain(every_id):
        return None
    problem = message_id_problem(item.message_id)
    if problem:
        return "message_id", problem
    for field in OTHER_IDS:
        value = getattr(item, field)
        problem = id_problem(value) if value is not None else None
        if problem:
            return field, problem
    return None


def _checked_time(index: int, item: SaveMessage, now_ms: int) -> int | Refusal:
    """The message's timestamp when it can be stored; else why it cannot."""
    found = _id_problem(item)
    if found is None:
        try:
            return storable_timestamp(item.ts, now_ms)
        except UnstorableTime as exc:
            found = ("ts", str(exc))
    field, problem = found
    mid = shown(item.message_id, MAX_ID_CHARS)
    return Refusal(index=index, message_id=mid, field=field, reason=f"{field} {problem}")


class _Speakers:
    """Who each message is from, resolved once per speaker: a request re-sends a few people's
    messages, thirty times over."""

    def __init__(self, agent: AgentConfig) -> None:
        self.agent = agent
        self._known: dict[tuple[bool, str | None, str | None], str] = {}

    def of(self, item: SaveMessage, user_id: str | None) -> str:
        who = (item.speaker_kind == "self", user_id, item.speaker_name)
        name = self._known.get(who)
        if name is None:
            name = self._known[who] = speaker_name(
                is_self=who[0],
                self_speaker=self.agent.speaker,
                speaker_aliases=self.agent.speaker_aliases,
                user_id=user_id,
                given_name=one_line_name(item.speaker_name) if item.speaker_name else None,
            )
        return name


def ingest(request: SaveRequest, agent: AgentConfig, source: str) -> Ingest:
    """Resolve each message and its conversation (the ones too short to keep are marked: the
    save script counts them skipped, or takes an emptied edit's message out of its chunk), and
    refuse, one by one, the ones that cannot be stored."""
    now_ms = int(time.time() * 1000)
    rules = agent.rules
    collection = agent.collection_name  # derived from the name: once, not per message
    speakers = _Speakers(agent)
    batches = SaveBatches()
    by_scope: dict[tuple[str | None, str | None], ConversationBatch] = {}
    refusals: list[Refusal] = []
    for index, item in enumerate(request.messages):
        ts = _checked_time(index, item, now_ms)
        if isinstance(ts, Refusal):
            refusals.append(ts)
            continue
        text = clean_text(item.text or "").strip()
        # A short one is stored never, but its id may be known: an edit that empties it.
        short = not is_storable(text, rules)
        scope = (item.conversation_id, item.channel_id)
        batch = by_scope.get(scope)
        if batch is None:  # a request's messages share one or a few conversations
            batch = by_scope[scope] = batches.batch(
                ConversationRef(
                    collection=collection,
                    source=source,
                    conversation_id=item.conversation_id,
                    channel_id=item.channel_id,
                )
            )
        user_id = item.user_id or item.discord_user_id
        is_self = item.speaker_kind == "self"
        speaker = speakers.of(item, user_id)
        line = stored_json(item.message_id, text, ts, speaker, user_id, is_self)
        batch.append(
            item.message_id, line, item.guild_id, fingerprint=text_fingerprint(text), short=short
        )
    return Ingest(batches, refusals)

"""Turns a /save body into buffered messages: refusals, speakers, times, conversations, skips."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

from api.schemas import Refusal, SaveMessage, SaveRequest
from shared.agents import AgentConfig
from shared.errors import RequestTooLarge
from shared.format.chunking import ChunkRules, is_storable
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
from shared.format.timestamps import (
    MAX_STORABLE_MS,
    MS_THRESHOLD,
    UnstorableTime,
    storable_timestamp,
)
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


# A message as /save receives it, every field that decides what is stored of it (or why not).
Fields = tuple[str, str | None, float | int | str | None, str, str | None, str | None,
               str | None, str | None, str | None, str | None]  # fmt: skip


def fields_of(item: SaveMessage) -> Fields:
    return (item.message_id, item.text, item.ts, item.speaker_kind, item.user_id,
            item.discord_user_id, item.speaker_name, item.channel_id, item.guild_id,
            item.conversation_id)  # fmt: skip


@dataclass(frozen=True, slots=True, eq=False)
class Naming:
    """What of its agent decides a message's stored form, a part of the cache key. One object
    per distinct value (`of`), compared and hashed by identity in C: a dataclass's own __eq__
    and __hash__ ran in Python on every cache lookup, as long as the rest of a hit."""

    self_speaker: str
    aliases: tuple[tuple[str, str], ...]
    rules: ChunkRules

    @classmethod
    def of(cls, agent: AgentConfig) -> Naming:
        return _naming(agent.speaker, tuple(sorted(agent.speaker_aliases.items())), agent.rules)


@lru_cache(maxsize=1_024)  # the agents in use; another agent's naming is made again
def _naming(speaker: str, aliases: tuple[tuple[str, str], ...], rules: ChunkRules) -> Naming:
    return Naming(speaker, aliases, rules)


@dataclass(frozen=True, slots=True)
class Prepared:
    """A message ready for the save script: its stored JSON, its text's fingerprint, and
    whether it is too short to store (only an edit of a known id can use it then)."""

    line: str
    fingerprint: str
    short: bool


def _id_problem(message: Fields) -> tuple[str, str] | None:
    """The first id of a message that cannot be stored, and why; None for nearly every one."""
    message_id, user_id, discord_user_id = message[0], message[4], message[5]
    channel_id, guild_id, conversation_id = message[7], message[8], message[9]
    # Plain ids joined are plain: one check clears a message of snowflakes (shared/format/ids.py).
    every_id = (
        f"{message_id}{user_id or ''}{discord_user_id or ''}"
        f"{channel_id or ''}{guild_id or ''}{conversation_id or ''}"
    )
    if message_id and is_plain(every_id):
        return None
    problem = message_id_problem(message_id)
    if problem:
        return "message_id", problem
    others = (user_id, discord_user_id, channel_id, guild_id, conversation_id)
    for field, value in zip(OTHER_IDS, others, strict=True):
        problem = id_problem(value) if value is not None else None
        if problem:
            return field, problem
    return None


def prepare(naming: Naming, message: Fields, now_ms: int) -> Prepared | tuple[str, str]:
    """The message ready to store, or the field that cannot be stored and why."""
    found = _id_problem(message)
    if found is not None:
        return found
    message_id, raw_text, raw_ts, kind, user_id, discord_user_id, given = message[:7]
    try:
        ts = storable_timestamp(raw_ts, now_ms)
    except UnstorableTime as exc:
        return "ts", str(exc)
    text = clean_text(raw_text or "").strip()
    user = user_id or discord_user_id
    is_self = kind == "self"
    speaker = speaker_name(
        is_self=is_self,
        self_speaker=naming.self_speaker,
        speaker_aliases=dict(naming.aliases),
        user_id=user,
        given_name=one_line_name(given) if given else None,
    )
    line = stored_json(message_id, text, ts, speaker, user, is_self)
    # A short one is stored never, but its id may be known: an edit that empties it.
    return Prepared(line, text_fingerprint(text), not is_storable(text, naming.rules))


class _Refused(Exception):
    """A message that cannot be stored: raised, so that lru_cache does not keep it (its ids
    may be of any size)."""


def _prepare_storable(naming: Naming, message: Fields) -> Prepared:
    ready = prepare(naming, message, 0)  # epoch-ms times never read `now`
    if not isinstance(ready, Prepared):
        raise _Refused(*ready)
    return ready


# The Discord plugin re-sends its last 30 messages on every turn: nearly every message of a
# request was prepared before, byte for byte (half of /save's own work, bench in BENCHMARKS.md).
# Kept: messages that can be stored, with an epoch-ms time (any other form may read differently
# as the clock moves) and at most CACHED_CHARS in all their fields (most chat lines). An entry
# holds its fields and its stored JSON, up to 4 bytes a character: about 13 KB at most, so
# 55 MB for 4,096 entries whatever clients send (tests/api/test_ingest_cache_bound.py).
CACHED_CHARS = 1_000
_prepared_before = lru_cache(maxsize=4_096)(_prepare_storable)


def _chars(item: SaveMessage) -> int:
    """The characters of a message's text, name and ids (written out: a generator over its
    fields cost a third of a cache hit)."""
    return (len(item.message_id) + len(item.text or "") + len(item.speaker_name or "")
            + len(item.user_id or "") + len(item.discord_user_id or "")
            + len(item.channel_id or "") + len(item.guild_id or "")
            + len(item.conversation_id or ""))  # fmt: skip


def _prepared(naming: Naming, item: SaveMessage, now_ms: int) -> Prepared | tuple[str, str]:
    message = fields_of(item)
    ts = item.ts
    if type(ts) is int and MS_THRESHOLD < ts <= MAX_STORABLE_MS and _chars(item) <= CACHED_CHARS:
        try:
            return _prepared_before(naming, message)
        except _Refused as refused:
            return refused.args[0], refused.args[1]
    return prepare(naming, message, now_ms)


def ingest(request: SaveRequest, agent: AgentConfig, source: str) -> Ingest:
    """Resolve each message and its conversation (the ones too short to keep are marked: the
    save script counts them skipped, or takes an emptied edit's message out of its chunk), and
    refuse, one by one, the ones that cannot be stored."""
    now_ms = int(time.time() * 1000)
    naming = Naming.of(agent)
    collection = agent.collection_name  # derived from the name: once, not per message
    batches = SaveBatches()
    by_scope: dict[tuple[str | None, str | None], ConversationBatch] = {}
    refusals: list[Refusal] = []
    for index, item in enumerate(request.messages):
        ready = _prepared(naming, item, now_ms)
        if not isinstance(ready, Prepared):
            field, problem = ready
            mid = shown(item.message_id, MAX_ID_CHARS)
            refusals.append(Refusal(index=index, message_id=mid, field=field,
                                    reason=f"{field} {problem}"))  # fmt: skip
            continue
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
        batch.append(item.message_id, ready.line, item.guild_id,
                     fingerprint=ready.fingerprint, short=ready.short)  # fmt: skip
    return Ingest(batches, refusals)

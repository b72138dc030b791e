"""Deletes within one agent: by source, conversation, message id or user, in Redis and Qdrant."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from qdrant_client import models

from shared import keys
from shared.agents import AgentConfig
from shared.buffer_deletes import BufferDeletes, BufferScope
from shared.conversations import ConversationRef, source_of
from shared.dead_letters import DeadLetter
from shared.recall_rules import message_ids_of
from shared.runtime import Runtime


@dataclass(frozen=True, slots=True)
class DeleteScope:
    """Exactly one of: a source; a conversation (source + channel or conversation id);
    a message id (any source); a user id."""

    source: str | None = None
    channel_id: str | None = None
    conversation_id: str | None = None
    message_id: str | None = None
    user_id: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteResult:
    points: int
    buffered: int
    dead_letters: int


def _match(key: str, value: str) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


def point_filter(scope: DeleteScope) -> models.Filter:
    """The points a scope covers, as far as Qdrant can select them itself."""
    if scope.message_id is not None:
        return models.Filter(must=[_match("messageIdList", scope.message_id)])
    if scope.user_id is not None:
        return models.Filter(must=[_match("userIdList", scope.user_id)])
    must = [_match("source", scope.source or "")]
    if scope.conversation_id is not None:
        must.append(_match("conversationId", scope.conversation_id))
    elif scope.channel_id is not None:
        must.append(_match("channelId", scope.channel_id))
    return models.Filter(must=must)


def _buffer_targets(runtime: Runtime, agent: AgentConfig, scope: DeleteScope) -> list[str]:
    """The conversations whose buffers a scope touches."""
    if scope.source is not None and scope.message_id is None and scope.user_id is None:
        if scope.conversation_id is not None or scope.channel_id is not None:
            ref = ConversationRef(agent.name, scope.source, scope.conversation_id, scope.channel_id)
            return [ref.key]
        prefix = ConversationRef(agent.name, scope.source).key.rsplit(":", 1)[0] + ":"
        return [c for c in _conversations(runtime, agent) if c.startswith(prefix)]
    return _conversations(runtime, agent)


def _conversations(runtime: Runtime, agent: AgentConfig) -> list[str]:
    members = runtime.redis.smembers(keys.conversations(agent.name))
    return sorted(m.decode() if isinstance(m, bytes) else m for m in members)


def _buffer_scope(scope: DeleteScope) -> BufferScope:
    if scope.message_id is not None:
        return BufferScope("ids", (scope.message_id,))
    if scope.user_id is not None:
        return BufferScope("user", (scope.user_id,))
    return BufferScope("all")


def _doomed_points(runtime: Runtime, collection: str, scope: DeleteScope) -> dict[str, dict]:
    store = runtime.store
    found = dict(store.scroll_payloads(collection, query_filter=point_filter(scope)))
    if scope.message_id is not None:
        # st-qdrant-memory's points only have the comma-joined `messageIds`: read them all.
        lacking_list = models.Filter(
            must=[models.IsEmptyCondition(is_empty=models.PayloadField(key="messageIdList"))]
        )
        for point_id, payload in store.scroll_payloads(collection, query_filter=lacking_list):
            if scope.message_id in message_ids_of(payload):
                found[point_id] = payload
    return found


def _ids_by_source(payloads: Iterable[dict]) -> dict[str, set[str]]:
    by_source: dict[str, set[str]] = defaultdict(set)
    for payload in payloads:
        if "source" in payload:  # only memory-pool's own ids are dedupe keys
            by_source[str(payload["source"])].update(message_ids_of(payload))
    return by_source


def delete(runtime: Runtime, agent: AgentConfig, scope: DeleteScope) -> DeleteResult:
    """Redis first (bumping generations, so in-flight flushes take their points back), then
    Qdrant; every deleted message id is tombstoned so a re-send never stores it again."""
    deletes = BufferDeletes(runtime.redis)
    removed = deletes.forget(
        _buffer_targets(runtime, agent, scope), _buffer_scope(scope), int(time.time() * 1000)
    )
    doomed = _doomed_points(runtime, agent.collection_name, scope)
    runtime.store.delete_points(agent.collection_name, list(doomed))
    tombstones = _ids_by_source(doomed.values())
    for conversation, message in removed:
        tombstones[source_of(conversation)].add(message.id)
    deletes.tombstone(agent.name, [(s, sorted(ids)) for s, ids in tombstones.items()])
    dead = runtime.dead_letters.remove_where(
        lambda letter: not _covers(letter, agent, scope, tombstones)
    )
    return DeleteResult(points=len(doomed), buffered=len(removed), dead_letters=dead)


def _covers(
    letter: DeadLetter, agent: AgentConfig, scope: DeleteScope, gone: dict[str, set[str]]
) -> bool:
    """Whether a dead letter holds deleted messages; replaying it would bring them back."""
    if letter.agent.casefold() != agent.name.casefold():
        return False
    payload = letter.payload
    source = str(payload.get("source", ""))
    if not message_ids_of(payload).isdisjoint(gone.get(source, set())):
        return True
    if scope.message_id is not None:
        return scope.message_id in message_ids_of(payload)
    if scope.user_id is not None:
        return scope.user_id in payload.get("userIdList", [])
    if source != scope.source:
        return False
    if scope.conversation_id is not None:
        return payload.get("conversationId") == scope.conversation_id
    if scope.channel_id is not None:
        return payload.get("channelId") == scope.channel_id
    return True

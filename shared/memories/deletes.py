"""The one delete service: what a delete within one agent (by source, conversation, message
id, user or point) does in Redis and in the store, in order. It owns the tombstones (a deleted
id is never stored again), the generation bump (through BufferDeletes: an in-flight flush
takes its points back), the removal of a deleted message's chunk-mates, and the pause of
dead-letter replays (the shared lock of shared/state/lock.py). Routes make one call."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import redis

from shared.agents import AgentConfig
from shared.errors import UpstreamUnavailable
from shared.format.fields import CHANNEL_ID, CONVERSATION_ID, MESSAGE_ID_LIST, SOURCE, USER_ID_LIST
from shared.format.payload import message_ids_of
from shared.memories.known_ids import LACKING_ID_LIST
from shared.runtime import Runtime
from shared.state import keys
from shared.state.buffer_deletes import BufferDeletes, BufferScope, Removed
from shared.state.conversations import ConversationRef, source_of
from shared.state.dead_letters import DeadLetter
from shared.state.lock import held
from shared.store.filters import Filter, HasIds, Match

REPLAY_WAIT_SECONDS = 10.0
REPLAY_LOCK_MS = 120_000


@dataclass(frozen=True, slots=True)
class DeleteScope:
    """Exactly one of: a source; a conversation (source + channel or conversation id);
    a message id (any source); a user id; one point (a chunk) by its id."""

    source: str | None = None
    channel_id: str | None = None
    conversation_id: str | None = None
    message_id: str | None = None
    user_id: str | None = None
    point_id: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteResult:
    points: int
    buffered: int
    dead_letters: int


@dataclass(frozen=True, slots=True)
class DeletePreview:
    points: int
    message_ids: int
    # st-qdrant-memory's points: it writes to Qdrant itself and may write them again
    points_without_source: int


def point_filter(scope: DeleteScope) -> Filter:
    """The points a scope covers, as far as the store can select them itself."""
    if scope.point_id is not None:
        return Filter(must=(HasIds((scope.point_id,)),))
    if scope.message_id is not None:
        return Filter(must=(Match(MESSAGE_ID_LIST, scope.message_id),))
    if scope.user_id is not None:
        return Filter(must=(Match(USER_ID_LIST, scope.user_id),))
    source = Match(SOURCE, scope.source or "")
    if scope.conversation_id is not None:
        return Filter(must=(source, Match(CONVERSATION_ID, scope.conversation_id)))
    if scope.channel_id is not None:
        return Filter(must=(source, Match(CHANNEL_ID, scope.channel_id)))
    return Filter(must=(source,))


def _buffer_targets(runtime: Runtime, agent: AgentConfig, scope: DeleteScope) -> list[str]:
    """The conversations whose buffers a scope touches."""
    collection = agent.collection_name
    if scope.point_id is not None:
        # Only the point's own messages, found from its payload (`_forget_chunk_mates`).
        return []
    if scope.source is not None and scope.message_id is None and scope.user_id is None:
        if scope.conversation_id is not None or scope.channel_id is not None:
            ref = ConversationRef(collection, scope.source, scope.conversation_id, scope.channel_id)
            return [ref.key]
        prefix = ConversationRef(collection, scope.source).key.rsplit(":", 1)[0] + ":"
        return [c for c in runtime.buffers.conversations_of(collection) if c.startswith(prefix)]
    return runtime.buffers.conversations_of(collection)


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
        for point_id, payload in store.scroll_payloads(collection, query_filter=LACKING_ID_LIST):
            if scope.message_id in message_ids_of(payload):
                found[point_id] = payload
    return found


def _ids_by_source(payloads: Iterable[dict]) -> dict[str, set[str]]:
    by_source: dict[str, set[str]] = defaultdict(set)
    for payload in payloads:
        if "source" in payload:  # only memory-pool's own ids are dedupe keys
            by_source[str(payload["source"])].update(message_ids_of(payload))
    return by_source


@contextmanager
def replays_paused(client: redis.Redis) -> Iterator[None]:
    """Hold the dead-letter replay lock, so a replay cannot write a chunk this delete removes."""
    lock = held(client, keys.REPLAY_LOCK, ttl_ms=REPLAY_LOCK_MS, wait_seconds=REPLAY_WAIT_SECONDS)
    with lock as got:
        if not got:
            raise UpstreamUnavailable("a dead-letter replay is running; try the delete again")
        yield


def _forget_chunk_mates(
    deletes: BufferDeletes, conversations: list[str], doomed: dict[str, dict], now_ms: int
) -> list[Removed]:
    """Every chunk that held a deleted message goes whole: its other messages that are still
    buffered (an open chunk's, or one kept under another conversation key) leave too."""
    removed: list[Removed] = []
    for source, ids in _ids_by_source(doomed.values()).items():
        targets = [c for c in conversations if source_of(c) == source]
        removed += deletes.forget(targets, BufferScope("ids", tuple(sorted(ids))), now_ms)
    return removed


def delete(runtime: Runtime, agent: AgentConfig, scope: DeleteScope) -> DeleteResult:
    """Redis first (bumping generations, so in-flight flushes take their points back), then
    Qdrant; every deleted message id is tombstoned so a re-send never stores it again."""
    deletes = BufferDeletes(runtime.redis)
    now_ms = int(time.time() * 1000)
    with replays_paused(runtime.redis):
        removed = deletes.forget(
            _buffer_targets(runtime, agent, scope), _buffer_scope(scope), now_ms
        )
        # Tombstones before Qdrant: if Qdrant fails now, a retry finds the rest, and a re-send
        # of what already left the buffers is refused meanwhile.
        deletes.tombstone(agent.collection_name, _tombstones(removed).items())
        doomed = _doomed_points(runtime, agent.collection_name, scope)
        mates = _forget_chunk_mates(
            deletes, runtime.buffers.conversations_of(agent.collection_name), doomed, now_ms
        )
        tombstones = _ids_by_source(doomed.values())
        for source, ids in _tombstones(mates).items():
            tombstones[source].update(ids)
        deletes.tombstone(agent.collection_name, tombstones.items())
        runtime.store.delete_points(agent.collection_name, list(doomed))
        for source, ids in _tombstones(removed).items():
            tombstones[source].update(ids)
        dead = runtime.dead_letters.remove_where(
            lambda letter: not _covers(letter, agent, scope, tombstones)
        )
    return DeleteResult(points=len(doomed), buffered=len(removed) + len(mates), dead_letters=dead)


def preview(runtime: Runtime, agent: AgentConfig, scope: DeleteScope) -> DeletePreview:
    """What `delete` would take from the collection now, changing nothing (a confirmation)."""
    doomed = _doomed_points(runtime, agent.collection_name, scope)
    message_ids = {i for payload in doomed.values() for i in message_ids_of(payload)}
    without_source = sum(1 for payload in doomed.values() if "source" not in payload)
    return DeletePreview(len(doomed), len(message_ids), without_source)


def _tombstones(removed: list[Removed]) -> dict[str, set[str]]:
    by_source: dict[str, set[str]] = defaultdict(set)
    for conversation, message_id in removed:
        if message_id is not None:
            by_source[source_of(conversation)].add(message_id)
    return by_source


def _covers(
    letter: DeadLetter, agent: AgentConfig, scope: DeleteScope, gone: dict[str, set[str]]
) -> bool:
    """Whether a dead letter holds deleted messages; replaying it would bring them back."""
    if letter.collection != agent.collection_name:
        return False
    payload = letter.payload
    source = str(payload.get("source", ""))
    if not message_ids_of(payload).isdisjoint(gone.get(source, set())):
        return True
    if scope.point_id is not None:
        return letter.point_id == scope.point_id
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

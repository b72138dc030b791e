"""The one delete service: what a delete within one agent (by source, conversation, message
id, user or point) does in Redis and in the store, in order. It owns the tombstones (a deleted
id is never stored again), the generation bump (through BufferDeletes: an in-flight flush
takes its points back), the rewrite of a chunk without its deleted messages (its chunk-mates
stay; shared/memories/delete_plan.py), and the pause of dead-letter replays and of edits'
rewrites (the locks of shared/state/lock.py). Routes make one call."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import redis

from shared.agents import AgentConfig
from shared.errors import DimensionMismatch, ModelMismatch, UpstreamUnavailable
from shared.format.fields import CHANNEL_ID, CONVERSATION_ID, MESSAGE_ID_LIST, SOURCE, USER_ID_LIST
from shared.format.naming import point_id
from shared.format.payload import message_ids_of
from shared.memories.delete_plan import DeletePlan, Partial, plan_delete
from shared.memories.delete_scope import DeleteScope
from shared.memories.known_ids import LACKING_ID_LIST
from shared.memories.letter_deletes import delete_from_letters
from shared.memories.rewrites import rewrite_chunks, rewrites_held
from shared.runtime import Runtime
from shared.state import keys
from shared.state.buffer_deletes import (
    BufferDeletes,
    BufferScope,
    EmptiedScope,
    Forgotten,
    Removed,
)
from shared.state.conversations import ConversationRef, source_of
from shared.state.lock import held
from shared.store.filters import Filter, HasIds, Match
from shared.store.rules import check_compatible

REPLAY_WAIT_SECONDS = 10.0
REPLAY_LOCK_MS = 120_000


@dataclass(frozen=True, slots=True)
class DeleteResult:
    points: int
    buffered: int
    dead_letters: int
    rewritten: int = 0  # chunks written again without the deleted messages


@dataclass(frozen=True, slots=True)
class DeletePreview:
    points: int
    message_ids: int
    # st-qdrant-memory's points: it writes to Qdrant itself and may write them again
    points_without_source: int
    points_rewritten: int = 0  # kept, without the deleted messages


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


def _partial(scope: DeleteScope) -> Partial:
    """Only a message id or a user takes part of a chunk; the other scopes take it whole."""
    if scope.point_id is not None:
        return Partial()
    return Partial(message_id=scope.message_id, user_id=scope.user_id)


def _buffer_targets(runtime: Runtime, agent: AgentConfig, scope: DeleteScope) -> list[str]:
    """The conversations whose buffers a scope touches."""
    collection = agent.collection_name
    if scope.point_id is not None:
        # Only the point's own messages, found from its payload (`_forget_chunk_mates`).
        return []
    if scope.source is not None and scope.message_id is None and scope.user_id is None:
        if scope.conversation_id is not None:
            return [ConversationRef(collection, scope.source, scope.conversation_id).key]
        prefix = ConversationRef(collection, scope.source).key.rsplit(":", 1)[0] + ":"
        of_source = [c for c in runtime.buffers.conversations_of(collection)
                     if c.startswith(prefix)]  # fmt: skip
        if scope.channel_id is not None:
            ref = ConversationRef(collection, scope.source, channel_id=scope.channel_id)
            # Messages that named a conversation id and a channel are the conversation of the
            # id, and its chunks carry the channel (point_filter takes them): its buffer too.
            deletes = BufferDeletes(runtime.redis)
            return [ref.key, *deletes.keyed_by_id_in_channel(of_source, scope.channel_id)]
        return of_source
    return runtime.buffers.conversations_of(collection)


def _buffer_scope(scope: DeleteScope) -> BufferScope:
    if scope.message_id is not None:
        return BufferScope("ids", (scope.message_id,))
    if scope.user_id is not None:
        return BufferScope("user", (scope.user_id,))
    return BufferScope("all")


def _emptied_scopes(scope: DeleteScope, targets: list[str]) -> list[EmptiedScope]:
    """The emptied messages a scope covers (a point's are not in it any more: none); a
    conversation's or a channel's are those of the conversations it `targets`."""
    if scope.message_id is not None:
        return [EmptiedScope("ids", (scope.message_id,))]
    if scope.user_id is not None:
        return [EmptiedScope("user", (scope.user_id,))]
    if scope.source is None:
        return []
    if scope.conversation_id is None and scope.channel_id is None:
        return [EmptiedScope("source", source=scope.source)]
    return [EmptiedScope("conversation", source=scope.source, conversation=t) for t in targets]


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


def _rewritable(runtime: Runtime, collection: str) -> bool:
    """Whether chunks of the collection can be written again: only with vectors of its own
    size and model (another one's writes are held, see /health)."""
    state = runtime.store.collection(collection)
    if state is None:
        return False
    embedder = runtime.embedder
    try:
        check_compatible(state, size=embedder.dimensions(), model=embedder.model)
    except (DimensionMismatch, ModelMismatch):
        return False
    return True


def _plan(runtime: Runtime, agent: AgentConfig, doomed: dict[str, dict], scope: DeleteScope,
          backed: set[str]) -> DeletePlan:  # fmt: skip
    """What the delete does to each chunk it found: a chunk that held a deleted message is
    written again without it, unless the collection takes no writes now (then, like a chunk
    that cannot be rebuilt, it goes whole with its other messages)."""
    plan = plan_delete(doomed, _partial(scope), agent.rules, backed)
    if plan.changes and not _rewritable(runtime, agent.collection_name):
        plan = plan_delete(doomed, Partial(), agent.rules, backed)
    return plan


@contextmanager
def replays_paused(client: redis.Redis) -> Iterator[None]:
    """Hold the dead-letter replay lock, so a replay cannot write a chunk this delete removes."""
    lock = held(client, keys.REPLAY_LOCK, ttl_ms=REPLAY_LOCK_MS, wait_seconds=REPLAY_WAIT_SECONDS)
    with lock as got:
        if not got:
            raise UpstreamUnavailable("a dead-letter replay is running; try the delete again")
        yield


def _forget_chunk_mates(
    deletes: BufferDeletes, conversations: list[str], whole: dict[str, dict], now_ms: int
) -> list[Removed]:
    """A chunk that goes whole takes its other messages with it, also those still buffered
    (under another conversation key)."""
    removed: list[Removed] = []
    for source, ids in _ids_by_source(whole.values()).items():
        targets = [c for c in conversations if source_of(c) == source]
        removed += deletes.forget(targets, BufferScope("ids", tuple(sorted(ids))), now_ms).removed
    return removed


def _buffer_backed(collection: str, forgotten: Forgotten) -> set[str]:
    """Stored points that are copies of what is still buffered: the written open chunks the
    delete touched, and the points of flushes that have not committed."""
    opened = {point_id(collection, source_of(c), first) for c, first, _ in forgotten.open}
    return opened | set(forgotten.inflight)


def _open_outcomes(collection: str, forgotten: Forgotten, plan: DeletePlan) -> tuple[int, int]:
    """Of the open chunks' points the delete removed: how many the flush writes again (their
    buffers keep messages), and how many are gone."""
    left = {point_id(collection, source_of(c), first): n for c, first, n in forgotten.open}
    kept = sum(1 for p in plan.backed if left.get(p, 0) > 0)
    return kept, sum(1 for p in plan.backed if left.get(p) == 0)


@contextmanager
def _rewrites_paused(client: redis.Redis, collection: str) -> Iterator[None]:
    with rewrites_held(client, collection, wait_seconds=REPLAY_WAIT_SECONDS) as got:
        if not got:
            raise UpstreamUnavailable("an edit of this agent's chunks is being written; try again")
        yield


def delete(runtime: Runtime, agent: AgentConfig, scope: DeleteScope) -> DeleteResult:
    """Redis first (bumping generations, so in-flight flushes take their points back), then
    Qdrant; every deleted message id is tombstoned so a re-send never stores it again. A chunk
    that held a deleted message is written again without it; its other messages stay."""
    deletes = BufferDeletes(runtime.redis)
    now_ms = int(time.time() * 1000)
    collection = agent.collection_name
    with replays_paused(runtime.redis), _rewrites_paused(runtime.redis, collection):
        # Emptied messages are in no chunk and no buffer: an edit back would store them. First,
        # so one an edit brings back meanwhile is in its buffer for the next step.
        targets = _buffer_targets(runtime, agent, scope)
        for emptied in _emptied_scopes(scope, targets):
            deletes.forget_emptied(collection, emptied)
        forgotten = deletes.forget(targets, _buffer_scope(scope), now_ms)
        # Tombstones before Qdrant: if Qdrant fails now, a retry finds the rest, and a re-send
        # of what already left the buffers is refused meanwhile.
        deletes.tombstone(collection, _tombstones(forgotten.removed).items())
        doomed = _doomed_points(runtime, collection, scope)
        plan = _plan(runtime, agent, doomed, scope, _buffer_backed(collection, forgotten))
        written = _apply(runtime, agent, plan, deletes, now_ms)
        deletes.invalidate([conversation for conversation, _, _ in forgotten.open], now_ms)
        kept, gone = _open_outcomes(collection, forgotten, plan)
        tombstones = written.tombstones
        for source, ids in _tombstones(forgotten.removed).items():
            tombstones[source].update(ids)
        dead, lettered = delete_from_letters(runtime.dead_letters, agent, scope, tombstones)
        deletes.tombstone(collection, lettered.items())
    return DeleteResult(
        points=written.deleted + gone,
        buffered=len(forgotten.removed) + written.mates,
        dead_letters=dead,
        rewritten=written.rewritten + kept,
    )


@dataclass
class _Written:
    deleted: int
    rewritten: int
    mates: int
    tombstones: dict[str, set[str]]


def _apply(runtime: Runtime, agent: AgentConfig, plan: DeletePlan, deletes: BufferDeletes,
           now_ms: int) -> _Written:  # fmt: skip
    """The plan in the store: tombstones first, then rewrites, then whole deletes."""
    collection = agent.collection_name
    tombstones = defaultdict(set, {s: set(ids) for s, ids in plan.dropped.items()})
    mates = _forget_chunk_mates(
        deletes, runtime.buffers.conversations_of(collection), plan.whole, now_ms
    )
    for source, ids in [*_ids_by_source(plan.whole.values()).items(),
                        *_tombstones(mates).items()]:  # fmt: skip
        tombstones[source].update(ids)
    deletes.tombstone(collection, tombstones.items())
    result = rewrite_chunks(runtime.store, runtime.embedder, collection, plan.changes,
                            language=agent.language, reason="delete")  # fmt: skip
    # A rewrite the provider refused must not keep the deleted text: that chunk goes whole.
    refused = {c.point_id: dict(c.payload) for c in plan.changes if c.point_id in result.refused}
    for source, ids in _ids_by_source(refused.values()).items():
        tombstones[source].update(ids)
    deletes.tombstone(collection, tombstones.items())
    runtime.store.delete_points(collection, [*plan.whole, *plan.backed, *refused])
    emptied = sum(1 for change in plan.changes if change.rewrite.empty)
    return _Written(
        deleted=len(plan.whole) + len(refused) + emptied,
        rewritten=len(result.rewritten),
        mates=len(mates),
        tombstones=tombstones,
    )


def preview(runtime: Runtime, agent: AgentConfig, scope: DeleteScope) -> DeletePreview:
    """What `delete` would take from the collection now, changing nothing (a confirmation)."""
    doomed = _doomed_points(runtime, agent.collection_name, scope)
    plan = _plan(runtime, agent, doomed, scope, backed=set())
    whole = {pid: payload for pid, payload in doomed.items() if pid in plan.whole}
    whole.update({c.point_id: doomed[c.point_id] for c in plan.changes if c.rewrite.empty})
    message_ids = {i for payload in whole.values() for i in message_ids_of(payload)}
    for ids in plan.dropped.values():
        message_ids |= ids
    without_source = sum(1 for payload in whole.values() if "source" not in payload)
    rewritten = sum(1 for change in plan.changes if not change.rewrite.empty)
    return DeletePreview(len(whole), len(message_ids), without_source, rewritten)


def _tombstones(removed: list[Removed]) -> dict[str, set[str]]:
    by_source: dict[str, set[str]] = defaultdict(set)
    for conversation, message_id in removed:
        if message_id is not None:
            by_source[source_of(conversation)].add(message_id)
    return by_source

"""The flush: buffered messages -> chunks -> one embedding batch -> upserts -> atomic commit.

A plain function that tests call directly with real Redis and a local-mode Qdrant; the Celery
task is only its shell. Everything it writes is keyed deterministically, so a flush that dies
anywhere can simply run again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType

from celery.exceptions import SoftTimeLimitExceeded

from shared.agents import AgentConfig, Agents
from shared.embedding.bm25 import document_terms
from shared.embedding.embedder import Embedder
from shared.errors import (
    CollectionMissing,
    DimensionMismatch,
    InputRejected,
    ModelMismatch,
    UpstreamUnavailable,
)
from shared.format.flush_plan import ChunkWrite, FlushPlan, idle_seconds, plan_flush
from shared.format.naming import point_id
from shared.format.payload import ChunkContext, chunk_payload, chunk_text
from shared.ops import log_context
from shared.runtime import Runtime
from shared.state.buffers import (
    Buffers,
    Claim,
    Commit,
    CommitOutcome,
    ConversationState,
    LeaseCheck,
)
from shared.state.conversation_meta import ConversationMeta, UnreadableConversation
from shared.state.dead_letters import DeadLetter
from shared.state.quarantine import Quarantine
from shared.store.interface import PointToWrite, Store
from workers.backoff import compute_backoff, retry_delay
from workers.collections import CollectionGuard
from workers.failures import Action
from workers.isolation import BLOCKED_RETRY_SECONDS, set_aside

log = logging.getLogger(__name__)

# A backlog (an outage, a large import) is worked off a slice per task, so one flush always
# ends well inside its time limit; the rest of the conversation is due again at once.
MAX_CLOSED_CHUNKS_PER_FLUSH = 32


@dataclass
class FlushDeps:
    """What a flush talks to; built once per worker process."""

    buffers: Buffers
    embedder: Embedder
    store: Store
    agents: Agents
    collections: CollectionGuard
    quarantine: Quarantine

    @classmethod
    def of(cls, runtime: Runtime) -> FlushDeps:
        """A process's clients, and the guard of its collections over them."""
        guard = CollectionGuard(runtime.store, runtime.embedder, runtime.redis)
        return cls(runtime.buffers, runtime.embedder, runtime.store, runtime.agents, guard,
                   runtime.quarantine)  # fmt: skip


@dataclass
class FlushReport:
    conversations: int = 0
    chunks_written: int = 0
    dead_letters: int = 0
    retried: int = 0
    quarantined: int = 0


@dataclass
class _Work:
    """One claimed conversation on its way through the flush."""

    state: ConversationState
    agent: AgentConfig
    plan: FlushPlan
    points: list[PointToWrite] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)
    open_dead: bool = False  # the open chunk itself was rejected: its messages leave the buffer

    @property
    def collection(self) -> str:
        return self.agent.collection_name

    @property
    def context(self) -> ChunkContext:
        meta = self.state.info
        return ChunkContext(
            source=meta.source,
            channel_id=meta.channel_id,
            guild_id=meta.guild_id,
            conversation_id=meta.conversation_id,
        )


def idle_seconds_of(agent: AgentConfig, info: ConversationMeta) -> float:
    return idle_seconds(agent.idle_flush_seconds, idle_timer=info.idle_timer)


def _prepare(state: ConversationState, deps: FlushDeps, report: FlushReport) -> _Work | None:
    agent = deps.agents.get(state.agent)
    if state.to_take_back and not _take_back(deps, state, agent.collection_name, report):
        return None
    info = state.info  # after a take-back, which forgets `written`
    quiet = time.time() - info.last_ms / 1000
    plan = plan_flush(
        state.messages,
        agent.rules,
        written=info.written,
        quiet_for_seconds=quiet,
        idle_seconds=idle_seconds_of(agent, info),
        force=info.force > 0,
        max_closed=MAX_CLOSED_CHUNKS_PER_FLUSH,
    )
    return _Work(state, agent, plan)


def _take_back(deps: FlushDeps, state: ConversationState, collection: str,
               report: FlushReport) -> bool:  # fmt: skip
    """An earlier flush of this conversation wrote points and never committed (it died, or a
    delete overtook it): delete them before planning, since they may hold deleted messages.
    Whatever they held that still counts is in the buffer and is written again. An open
    chunk an edit took its first message out of is retired the same way: its point id came
    from that message, the chunk is written anew under its new first one."""
    doomed = state.inflight
    if state.info.retire:
        doomed.append(point_id(collection, state.info.source, state.info.retire))
    try:
        deps.store.delete_points(collection, doomed)
    except UpstreamUnavailable as exc:
        with log_context.bound(agent=state.agent, conversation=state.claim.conversation):
            log.warning("taking back %s waits: %s", state.claim.conversation, exc)
        deps.buffers.release(state.claim, retry_in=compute_backoff(1), failed=True)
        report.retried += 1  # given back to retry: counted like any other
        return False
    deps.buffers.settle(state.claim, state.info.retire)
    state.took_back()
    return True


# Out of time is no conversation's fault: everyone in the step is given back, none counted.
_OUT_OF_TIME = (UpstreamUnavailable, SoftTimeLimitExceeded)


def _retry(deps: FlushDeps, work: _Work, error: Exception, report: FlushReport) -> None:
    """An outage: the conversation is given back to be flushed again after a backoff."""
    delay = retry_delay(work.state.info.attempts, error)
    with log_context.bound(agent=work.agent.name, conversation=work.state.claim.conversation):
        log.warning("flush of %s waits %.1fs: %s", work.state.claim.conversation, delay, error)
    deps.buffers.release(work.state.claim, retry_in=delay, failed=True)
    report.retried += 1


def _dead_letter(work: _Work, write: ChunkWrite, reason: str) -> str:
    return DeadLetter(
        agent=work.agent.name,
        collection=work.collection,
        conversation=work.state.claim.conversation,
        point_id=point_id(work.collection, work.context.source, write.messages[0].id),
        payload=chunk_payload(write.messages, work.context),
        reason=reason,
        at=int(time.time() * 1000),
    ).to_json()


def _attach_vectors(work: list[_Work], vectors: Sequence[list[float] | InputRejected]) -> None:
    position = 0
    for item in work:
        for write in item.plan.writes:
            vector = vectors[position]
            position += 1
            if isinstance(vector, InputRejected):
                # Its reason may quote the text: the dead letter keeps it, the log does not.
                log.error("embedding provider rejected a chunk for good (see /dead-letters)")
                item.dead.append(_dead_letter(item, write, str(vector)))
                item.open_dead = item.open_dead or not write.closed
                continue
            payload = chunk_payload(write.messages, item.context)
            pid = point_id(item.collection, item.context.source, write.messages[0].id)
            # BM25 terms next to the dense vector, in the same upsert (shared/embedding/bm25.py)
            terms = document_terms(payload["text"], item.agent.language)
            item.points.append(PointToWrite(id=pid, vector=vector, payload=payload, terms=terms))


def _ready_for_writes(deps: FlushDeps, work: list[_Work], report: FlushReport) -> list[_Work]:
    """Keep the conversations whose collection can take writes; hold or retry the rest."""
    ready = []
    for item in work:
        problem: Exception | None = None
        # Qdrant refusing the collection sets its conversations aside, each alone
        with _Alone(deps, report, item.state):
            problem = _collection_problem(deps, item.collection)
            if problem is None:
                ready.append(item)
        # the flush's own bookkeeping: a failure here (Redis gone) fails the task, as always
        if isinstance(problem, UpstreamUnavailable):
            _retry(deps, item, problem, report)
        elif problem is not None:
            deps.buffers.release(item.state.claim, retry_in=BLOCKED_RETRY_SECONDS, failed=False)
    return ready


def _collection_problem(deps: FlushDeps, collection: str) -> Exception | None:
    """Why the collection cannot take writes now (another size or model: held; Qdrant down:
    retried), or None; any other failure is raised."""
    try:
        deps.collections.ensure(collection)
    except (DimensionMismatch, ModelMismatch, UpstreamUnavailable) as exc:
        return exc
    return None


def _upsert(deps: FlushDeps, work: list[_Work], report: FlushReport) -> list[_Work]:
    """Upsert per collection; a collection that is down sends its conversations to retry, one
    that refuses the write is written conversation by conversation (`_upsert_each`)."""
    by_collection: dict[str, list[_Work]] = {}
    for item in work:
        by_collection.setdefault(item.collection, []).append(item)
    stored = []
    for collection, items in by_collection.items():
        points = [point for item in items for point in item.points]
        try:
            if points:
                deps.store.upsert(collection, points)
        except CollectionMissing as exc:
            # Deleted under us: the next flush creates it again and writes everything buffered.
            deps.collections.forget(collection)
            for item in items:
                _retry(deps, item, exc, report)
            continue
        except _OUT_OF_TIME as exc:
            for item in items:
                _retry(deps, item, exc, report)
            continue
        except Exception as exc:
            stored.extend(_upsert_each(deps, collection, items, exc, report))
            continue
        stored.extend(items)
    return stored


def _upsert_each(deps: FlushDeps, collection: str, items: list[_Work], error: Exception,
                 report: FlushReport) -> list[_Work]:  # fmt: skip
    """Qdrant refused a collection's write: each conversation is written alone, so only the
    ones it refuses are set aside."""
    if len(items) == 1:
        _isolated(deps, report, items[0].state.claim, items[0].state.info, error)
        return []
    log.warning("Qdrant refused a write to %s (%s); writing its conversations one by one",
                collection, error)  # fmt: skip
    stored = []
    for item in items:
        with _Alone(deps, report, item.state):
            try:
                if item.points:
                    deps.store.upsert(collection, item.points)
            except CollectionMissing:
                deps.collections.forget(collection)
                raise
            stored.append(item)
    return stored


def _commit(deps: FlushDeps, item: _Work, report: FlushReport) -> None:
    plan = item.plan
    open_chars = plan.open_chars if item.open_dead else 0
    commit = Commit(
        consumed=plan.consumed + (plan.open_count if item.open_dead else 0),
        consumed_chars=plan.consumed_chars + open_chars,
        open_count=plan.open_count,
        written=0 if item.open_dead else plan.written_after,
        idle_seconds=idle_seconds_of(item.agent, item.state.info),
        wrote_points=bool(item.points),
        dead_letters=item.dead,
        forced=item.state.info.force,
    )
    outcome = deps.buffers.commit(item.state, commit)
    if outcome is CommitOutcome.CHANGED:
        # Messages were deleted while this flush ran: what it wrote may hold them. It still
        # holds the lease, so nobody else writes these points while it takes them back.
        item.state.writing([point.id for point in item.points])
        if _take_back(deps, item.state, item.collection, report):
            deps.buffers.release(item.state.claim, retry_in=0, failed=False)
        return
    if outcome is CommitOutcome.DONE:
        report.conversations += 1
        report.chunks_written += len(item.points)
        report.dead_letters += len(item.dead)


def _still_ours(deps: FlushDeps, item: _Work) -> bool:
    outcome = deps.buffers.renew(item.state, [point.id for point in item.points])
    if outcome is LeaseCheck.CHANGED:
        # Changed by a delete while embedding: flush it again from what is left.
        deps.buffers.release(item.state.claim, retry_in=0, failed=False)
    return outcome is LeaseCheck.KEPT


def _isolated(deps: FlushDeps, report: FlushReport, claim: Claim, info: ConversationMeta | None,
              error: Exception) -> None:  # fmt: skip
    """One conversation failed: set it aside alone (workers/isolation.py). If even that fails
    (Redis gone), the lease expires and the sweep hands the conversation out again."""
    try:
        action = set_aside(deps.buffers, deps.quarantine, claim, info, error)
    except Exception:
        log.exception("could not set aside conversation %s after: %s", claim.conversation, error)
        return
    report.quarantined += int(action is Action.QUARANTINE)
    report.retried += int(action in (Action.RETRY, Action.COUNT))


class _Alone:
    """One conversation's step of the flush: whatever it raises sets that conversation aside
    alone (`_isolated`) and the flush goes on with the others. What follows the step inside
    the `with` runs only when the step succeeded."""

    def __init__(
        self, deps: FlushDeps, report: FlushReport, state: ConversationState | Claim
    ) -> None:
        self.deps, self.report = deps, report
        self.claim = state if isinstance(state, Claim) else state.claim
        # a step that starts from a claim sets this once it has read the conversation
        self.state = None if isinstance(state, Claim) else state

    def __enter__(self) -> _Alone:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 _: TracebackType | None) -> bool:  # fmt: skip
        if not isinstance(error, Exception):
            return False  # none, or an interrupt: not this conversation's failure
        info = self.state.info if self.state is not None else None
        if info is None and isinstance(error, UnreadableConversation):
            info = error.known  # a hash that cannot be read is still named by its agent
        _isolated(self.deps, self.report, self.claim, info, error)
        return True


def _start(claim: Claim, deps: FlushDeps, report: FlushReport) -> _Work | None:
    """Read and plan one conversation; a failure stays with it."""
    with _Alone(deps, report, claim) as alone:
        state = alone.state = deps.buffers.begin(claim)
        if state is None:
            return None
        if not state.messages and not state.to_take_back:
            # Nothing buffered (a due entry left behind): done, whatever its agent's name.
            deps.buffers.commit(state, Commit(0, 0, 0, 0, 0.0, wrote_points=False))
            return None
        return _prepare(state, deps, report)
    return None


def _formatted(deps: FlushDeps, work: list[_Work], report: FlushReport) -> list[_Work]:
    """Each conversation's chunk texts; one that cannot be formatted (a date beyond year 9999)
    is set aside alone."""
    done = []
    for item in work:
        with _Alone(deps, report, item.state):
            item.texts = [chunk_text(write.messages) for write in item.plan.writes]
            done.append(item)
    return done


def _embedded(deps: FlushDeps, work: list[_Work], report: FlushReport) -> list[_Work]:
    """One embedding batch for all; if it fails for another reason than an outage, each
    conversation is embedded alone, so only the one that breaks it is set aside."""
    try:
        vectors = deps.embedder.embed([text for item in work for text in item.texts])
    except _OUT_OF_TIME as exc:
        for item in work:
            _retry(deps, item, exc, report)
        return []
    except Exception as exc:
        if len(work) == 1:
            _isolated(deps, report, work[0].state.claim, work[0].state.info, exc)
            return []
        log.warning("an embedding batch failed (%s); embedding conversations one by one", exc)
        return [item for one in work for item in _embedded(deps, [one], report)]
    return _attached(deps, work, vectors, report)


def _attached(deps: FlushDeps, work: list[_Work], vectors: Sequence[list[float] | InputRejected],
              report: FlushReport) -> list[_Work]:  # fmt: skip
    attached, position = [], 0
    for item in work:
        count = len(item.plan.writes)
        with _Alone(deps, report, item.state):
            _attach_vectors([item], vectors[position : position + count])
            attached.append(item)
        position += count
    return attached


def _kept(deps: FlushDeps, work: list[_Work], report: FlushReport) -> list[_Work]:
    """The conversations still ours and unchanged after the embedding's wait."""
    kept = []
    for item in work:
        with _Alone(deps, report, item.state):
            if _still_ours(deps, item):
                kept.append(item)
    return kept


def _committed(deps: FlushDeps, work: list[_Work], report: FlushReport) -> None:
    for item in work:
        with _Alone(deps, report, item.state):
            _commit(deps, item, report)


def flush(claims: Sequence[Claim], deps: FlushDeps) -> FlushReport:
    """Flush the claimed conversations together, so their chunks share embedding requests.
    Whatever fails stays with its own conversation (or collection): the others are written."""
    report = FlushReport()
    work = [item for claim in claims if (item := _start(claim, deps, report)) is not None]
    _committed(deps, [item for item in work if not item.plan.writes], report)
    ready = _formatted(deps, [item for item in work if item.plan.writes], report)
    ready = _ready_for_writes(deps, ready, report)
    if not ready:
        return report
    ready = _embedded(deps, ready, report)
    # Embedding may have taken a while: keep only conversations still ours and unchanged.
    ready = _kept(deps, ready, report)
    _committed(deps, _upsert(deps, ready, report), report)
    return report

"""Edits of written chunks (README "Edits"): /save changed what was still buffered and queued
the rest (shared/state/edits.py); here each chunk holding an edited message is written again
with its new text, or without it when the new text is too short to keep. An emptied message
whose edit brings it back, and that no chunk holds any more, returns through its buffer."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from shared.agents import AgentConfig
from shared.errors import MemoryPoolError
from shared.format.chunking import is_storable
from shared.format.fields import MESSAGE_ID_LIST, SOURCE
from shared.format.messages import Message
from shared.format.payload import message_ids_of, messages_of
from shared.format.rewrite import rewritten
from shared.memories.rewrites import ChunkChange, rewrite_chunks, rewrites_held
from shared.state import keys
from shared.state.dead_letters import DeadLetters
from shared.state.edits import PendingEdit, PendingEdits
from shared.state.text import as_text
from shared.store.filters import Filter, Match, MatchAny
from workers.dead_letter_edits import edit_dead_letters
from workers.flush import FlushDeps

log = logging.getLogger(__name__)


@dataclass
class EditReport:
    rewritten: int = 0  # chunks written again (or deleted, emptied)
    stale: int = 0  # edits of chunks that cannot be rebuilt: they keep their text
    restored: int = 0  # emptied messages back in their conversation's buffer
    dropped: int = 0  # edits of messages no chunk or dead letter holds (a deleted chunk's)
    left: int = 0  # edits still waiting (a newer one came meanwhile, or the lock was busy)


@dataclass
class _Plan:
    changes: list[ChunkChange] = field(default_factory=list)
    emptied: dict[str, str] = field(default_factory=dict)
    handled: list[PendingEdit] = field(default_factory=list)
    unheld: list[PendingEdit] = field(default_factory=list)  # no chunk holds the message
    stale: int = 0


def _agent(deps: FlushDeps, collection: str) -> AgentConfig | None:
    name = deps.buffers.redis.hget(keys.NAMES, collection)
    try:
        return deps.agents.get(as_text(name)) if name is not None else None
    except MemoryPoolError:
        return None


def _chunks_holding(
    deps: FlushDeps, agent: AgentConfig, source: str, ids: Iterable[str]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The written chunks of `source` that hold any of `ids`: (point id, payload)."""
    ids_filter = MatchAny(MESSAGE_ID_LIST, tuple(sorted(ids)))
    query = Filter(must=(ids_filter, Match(SOURCE, source)))
    yield from deps.store.scroll_payloads(agent.collection_name, query_filter=query)


def _written_since(deps: FlushDeps, agent: AgentConfig, edits: list[PendingEdit]) -> set[str]:
    """The fields of `edits` whose message a chunk holds now, though none did when the round
    looked (`_plan`): a replay wrote its dead letter meanwhile (with the old text). No letter
    held them, so that replay is done: the next round finds the chunk and rewrites it."""
    by_source: dict[str, set[str]] = defaultdict(set)
    for edit in edits:
        by_source[edit.source].add(edit.message_id)
    written: set[str] = set()
    for source, ids in by_source.items():
        for _, payload in _chunks_holding(deps, agent, source, ids):
            written |= {keys.edit_field(source, i) for i in message_ids_of(payload) & ids}
    return written


def _plan(deps: FlushDeps, agent: AgentConfig, edits: list[PendingEdit]) -> _Plan:
    plan = _Plan()
    by_source: dict[str, dict[str, PendingEdit]] = defaultdict(dict)
    for edit in edits:
        by_source[edit.source][edit.message_id] = edit
    for source, wanted in by_source.items():
        held: set[str] = set()
        for point_id, payload in _chunks_holding(deps, agent, source, wanted):
            ids = message_ids_of(payload) & wanted.keys()
            held |= ids
            messages = messages_of(payload)
            if messages is None:
                plan.stale += len(ids)
                log.info("%d edits in %s keep their old text: chunk %s cannot be rebuilt",
                         len(ids), agent.name, point_id)  # fmt: skip
                continue
            texts = {i: Message.from_json(wanted[i].line).text for i in ids}
            change = rewritten(messages, agent.rules, texts=texts)
            plan.changes.append(ChunkChange(point_id, payload, messages, change))
            for message in change.emptied:
                plan.emptied[keys.edit_field(source, message.id)] = message.to_json()
        plan.handled += [wanted[i] for i in sorted(held)]
        plan.unheld += [wanted[i] for i in sorted(wanted.keys() - held)]
    return plan


def apply_edits(collection: str, deps: FlushDeps, pending: PendingEdits) -> EditReport:
    """Apply an agent's waiting edits to its written chunks. Raises UpstreamUnavailable when
    the provider or Qdrant is down, DimensionMismatch or ModelMismatch when the collection
    takes no writes of the configured model (held, as its flushes are): the edits wait."""
    report = EditReport()
    agent = _agent(deps, collection)
    edits = pending.pending(collection)
    if agent is None or not edits or deps.store.collection(collection) is None:
        # no agent accepted for it, or no collection (deleted): nothing holds these messages
        report.left = pending.done(collection, edits)
        report.dropped = len(edits)
        return report
    deps.collections.ensure(collection)  # never a vector of another size or model in it
    with rewrites_held(deps.buffers.redis, collection, wait_seconds=0) as got:
        if not got:
            report.left = len(edits)
            return report
        plan = _plan(deps, agent, edits)
        pending.keep_emptied(collection, plan.emptied)
        result = rewrite_chunks(deps.store, deps.embedder, collection, plan.changes,
                                language=agent.language, reason="edit")  # fmt: skip
        report.rewritten = len(result.rewritten) + len(result.deleted)
        _to_letters(deps, pending, agent, plan, report)
    return report


def _to_letters(
    deps: FlushDeps, pending: PendingEdits, agent: AgentConfig, plan: _Plan, report: EditReport
) -> None:
    """Every edit goes to the dead letters too, not only those no stored chunk holds: an open
    chunk stored and then refused once it grew is a letter for the same point, holding the
    same messages, and its replay would write their old texts over the edited point. An edit
    that neither a chunk nor a letter holds comes back through its buffer (or is dropped)."""
    collection = agent.collection_name
    lettered = edit_dead_letters(DeadLetters(deps.buffers.redis), pending, agent, collection,
                                 plan.handled + plan.unheld)  # fmt: skip
    report.stale = plan.stale + lettered.stale
    waiting = {e.field for e in lettered.waiting}  # a replay runs: the next round again
    unheld = {e.field for e in plan.unheld}
    rest = [e for e in lettered.rest if e.field in unheld]
    written = _written_since(deps, agent, rest) if rest else set()
    for edit in (e for e in rest if e.field not in written):  # those wait
        if _restore(deps, pending, agent, collection, edit):
            report.restored += 1
        else:
            report.dropped += 1
    handled = [e for e in plan.handled if e.field not in waiting] + lettered.handled
    report.left = pending.done(collection, handled, {**plan.emptied, **lettered.emptied})


def _restore(deps: FlushDeps, pending: PendingEdits, agent: AgentConfig, collection: str,
             edit: PendingEdit) -> bool:  # fmt: skip
    """An edit of a message no chunk holds: an emptied one comes back with a long text; a
    short one is out already. The edit is done either way."""
    if not is_storable(Message.from_json(edit.line).text, agent.rules):
        pending.done(collection, [edit])
        return False
    back = pending.restore(collection, edit, idle_seconds=agent.idle_flush_seconds,
                           min_chars=agent.chunk_min_chars)  # fmt: skip
    if not back:
        log.info("an edit of %s in %s found no chunk holding it", edit.message_id, agent.name)
    return back

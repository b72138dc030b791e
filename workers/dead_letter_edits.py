"""Edits of messages whose chunk is a dead letter (the embedding provider refused it): the
letter takes the new text, so a replay stores what was said last, not the refused first text.
An edit that no chunk and no letter holds is the caller's to restore or drop."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from shared.agents import AgentConfig
from shared.format import fields
from shared.format.messages import Message
from shared.format.payload import message_ids_of
from shared.memories.letters import changed_letter
from shared.state import keys
from shared.state.dead_letters import DeadLetter, DeadLetters
from shared.state.edits import PendingEdit, PendingEdits
from shared.state.lock import held

log = logging.getLogger(__name__)

LOCK_MS = 30_000


@dataclass
class LetterEdits:
    handled: list[PendingEdit] = field(default_factory=list)  # in a letter now (or stale)
    rest: list[PendingEdit] = field(default_factory=list)  # held by no letter
    waiting: list[PendingEdit] = field(default_factory=list)  # a replay runs: tried again later
    emptied: dict[str, str] = field(default_factory=dict)  # edit field -> the record before
    stale: int = 0


def edit_dead_letters(
    dead: DeadLetters,
    pending: PendingEdits,
    agent: AgentConfig,
    collection: str,
    edits: list[PendingEdit],
) -> LetterEdits:
    """Give the collection's dead letters the new texts of `edits` (any of them: a letter may
    hold a message a stored chunk holds too, workers/edits.py). Under the replay lock: a
    replay running meanwhile would store the text read before."""
    result = LetterEdits()
    if not edits or not dead.total():
        # No letter at all, and none can come to hold these: a message whose edit waits here
        # is in no buffer, so no flush dead-letters it (nor takes the replay lock for nothing).
        result.rest = list(edits)
        return result
    with held(dead.redis, keys.REPLAY_LOCK, ttl_ms=LOCK_MS) as got:
        if not got:
            result.waiting = list(edits)
            return result
        wanted = {(e.source, e.message_id): e for e in edits}
        for found in dead.of_collection(collection):
            letter = found[2]
            source = str(letter.payload.get(fields.SOURCE, ""))
            ids = [i for i in message_ids_of(letter.payload) if (source, i) in wanted]
            if ids:
                mine = [wanted.pop((source, i)) for i in ids]
                _edit_letter(dead, pending, agent, found, mine, result)
        result.rest = list(wanted.values())
    return result


def _edit_letter(
    dead: DeadLetters,
    pending: PendingEdits,
    agent: AgentConfig,
    found: tuple[str, bytes, DeadLetter],
    edits: list[PendingEdit],
    result: LetterEdits,
) -> None:
    key, raw, letter = found
    texts = {e.message_id: Message.from_json(e.line).text for e in edits}
    change = changed_letter(letter, agent.rules, texts=texts)
    if change is None:  # an older letter without its messages: it keeps its text
        result.stale += len(edits)
        result.handled += edits
        return
    source = str(letter.payload.get(fields.SOURCE, ""))
    emptied = {keys.edit_field(source, m.id): m.to_json() for m in change.rewrite.emptied}
    # kept before the letter loses them, as a rewritten chunk's are (workers/edits.py)
    pending.keep_emptied(letter.collection, emptied)
    if not dead.replace(key, raw, change.letter):
        result.waiting += edits  # moved to the replay queue meanwhile: found there next time
        return
    result.emptied.update(emptied)
    result.handled += edits
    log.info("%d edits of %s given to a dead letter", len(edits), agent.name)

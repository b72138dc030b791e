"""A delete reaches the dead letters too: a replay must never bring a deleted message back.
A letter that held deleted messages is kept without them (its other messages are no more
deleted than a stored chunk's are), and goes when nothing is left, or whole when the delete
covers all of it or it cannot be rebuilt; every message id it loses is tombstoned."""

from __future__ import annotations

from collections import defaultdict

from shared.agents import AgentConfig
from shared.format import fields
from shared.format.payload import message_ids_of, messages_of
from shared.memories.delete_scope import DeleteScope
from shared.memories.letters import changed_letter
from shared.state.dead_letters import DeadLetter, DeadLetters

ROUNDS = 3  # a letter moved to the replay queue meanwhile is found there in the next round
WHOLE = None


def delete_from_letters(
    dead: DeadLetters, agent: AgentConfig, scope: DeleteScope, gone: dict[str, set[str]]
) -> tuple[int, dict[str, set[str]]]:
    """Take the deleted messages (the scope's, and `gone`: deleted elsewhere by this delete)
    out of the agent's letters, under the caller's pause of replays. Returns the letters
    changed or removed, and the ids they lost by source (to tombstone)."""
    changed: set[str] = set()
    lost: dict[str, set[str]] = defaultdict(set)
    for _ in range(ROUNDS):
        moved = False
        for key, raw, letter in dead.of_collection(agent.collection_name):
            drops = dropped_ids(letter, scope, gone)
            if drops is not WHOLE and not drops:
                continue
            source = str(letter.payload.get(fields.SOURCE, ""))
            ids = message_ids_of(letter.payload) if drops is WHOLE else drops
            change = None if drops is WHOLE else changed_letter(letter, agent.rules, dropped=drops)
            if not dead.replace(key, raw, change.letter if change is not None else None):
                moved = True
                continue
            changed.add(raw.decode("utf-8", "replace"))
            lost[source].update(ids)
        if not moved:
            break
    return len(changed), dict(lost)


def dropped_ids(
    letter: DeadLetter, scope: DeleteScope, gone: dict[str, set[str]]
) -> set[str] | None:
    """The ids the delete takes out of `letter` (empty: none), or WHOLE for all of it."""
    payload = letter.payload
    source = str(payload.get(fields.SOURCE, ""))
    ids = message_ids_of(payload)
    hit = ids & gone.get(source, set())
    if scope.point_id is not None:
        return WHOLE if letter.point_id == scope.point_id else hit
    if scope.message_id is not None:
        return hit | (ids & {scope.message_id})
    if scope.user_id is not None:
        messages = messages_of(payload)
        if messages is None:  # who said what is not known: the user's letters go whole
            return WHOLE if scope.user_id in payload.get(fields.USER_ID_LIST, []) else hit
        return hit | {m.id for m in messages if m.user_id == scope.user_id}
    if source != scope.source:
        return hit
    if scope.conversation_id is not None:
        covered = payload.get(fields.CONVERSATION_ID) == scope.conversation_id
    elif scope.channel_id is not None:
        covered = payload.get(fields.CHANNEL_ID) == scope.channel_id
    else:
        covered = True
    return WHOLE if covered else hit

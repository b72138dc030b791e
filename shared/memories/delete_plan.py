"""What a delete does to each stored chunk that holds a deleted message: rewrite it without
them (its other messages stay), or remove it whole (a chunk that cannot be rebuilt, a scope
that takes every message, a copy of what is still buffered)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.format.chunking import ChunkRules
from shared.format.payload import message_ids_of, messages_of
from shared.format.rewrite import rewritten
from shared.memories.rewrites import ChunkChange


@dataclass(frozen=True, slots=True)
class Partial:
    """A delete that takes some messages of a chunk: one message id, or one user's messages."""

    message_id: str | None = None
    user_id: str | None = None


@dataclass
class DeletePlan:
    whole: dict[str, dict[str, Any]] = field(default_factory=dict)  # removed with every message
    backed: list[str] = field(default_factory=list)  # copies of buffered chunks: removed
    changes: list[ChunkChange] = field(default_factory=list)  # rewritten without the deleted
    # source -> the ids the rewrites take out (tombstoned; their chunk-mates are not)
    dropped: dict[str, set[str]] = field(default_factory=dict)


def _matching(scope: Partial, payload: Mapping[str, Any]) -> set[str] | None:
    """The ids of a chunk the scope deletes, when only some of its messages go; None when the
    chunk goes whole (no messages to rebuild it from)."""
    messages = messages_of(payload)
    if messages is None:
        return None
    if scope.message_id is not None:
        return {scope.message_id} & message_ids_of(payload)
    return {message.id for message in messages if message.user_id == scope.user_id}


def plan_delete(
    doomed: Mapping[str, dict[str, Any]],
    scope: Partial,
    rules: ChunkRules,
    backed: set[str],
) -> DeletePlan:
    """Sort the chunks a delete found: `backed` are point ids of chunks still buffered (the
    flush writes them again from what is left)."""
    plan = DeletePlan()
    if scope.message_id is None and scope.user_id is None:
        plan.whole = dict(doomed)  # every message in scope: no chunk-mate stays
        return plan
    for point_id, payload in doomed.items():
        if point_id in backed:
            plan.backed.append(point_id)
            continue
        gone = _matching(scope, payload)
        messages = messages_of(payload)
        if gone is None or messages is None:
            plan.whole[point_id] = payload
            continue
        change = rewritten(messages, rules, dropped=gone)
        plan.changes.append(ChunkChange(point_id, payload, messages, change))
        source = str(payload.get("source", ""))
        plan.dropped.setdefault(source, set()).update(gone)
    return plan

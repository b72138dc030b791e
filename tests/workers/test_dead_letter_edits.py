"""Edits of dead-lettered messages (workers/dead_letter_edits.py) against a replay that runs
between the edit round's look at the store and its look at the letters: real Redis, the
embedding test server and Qdrant Edge, the replay and the edit round as the tasks call them."""

from __future__ import annotations

from typing import Any

import pytest

import workers.edits
from shared.format.naming import collection_name
from shared.state.dead_letters import DeadLetters
from shared.state.edits import PendingEdits
from tests.support.embedding_server import EmbeddingServer
from tests.support.flush_world import HALF, World, message
from tests.workers.test_edits import edit, empty
from workers.edits import apply_edits
from workers.flush import flush
from workers.replay import replay

COLLECTION = collection_name("mythos")


def replay_now(world: World) -> None:
    deps = world.deps
    report = replay(client=world.redis, agents=deps.agents, dead=DeadLetters(world.redis),
                    embedder=deps.embedder, store=deps.store, collections=deps.collections,
                    lease=30)  # fmt: skip
    assert report.stored == 1


def texts_of(world: World) -> dict[str, list[str]]:
    """Message id -> the texts of the points holding it."""
    found: dict[str, list[str]] = {}
    for payload, _ in world.points(COLLECTION).values():
        for mid in payload["messageIdList"]:
            found.setdefault(mid, []).append(payload["text"])
    return found


@pytest.mark.parametrize("new_text", ["lighthouse " + HALF, "ok"])
def test_an_edit_racing_the_replay_of_its_letter_is_not_lost(
    world: World, embeddings: EmbeddingServer, monkeypatch: pytest.MonkeyPatch, new_text: str
) -> None:
    """Review: the edit round found no chunk holding A (its chunk was a dead letter queued for
    replay); the replay then wrote the letter's old text, and the round, under the replay lock
    at last, found no letter either and dropped the edit: the point kept the refused text for
    good (the dedupe mark already held the new text's fingerprint)."""
    embeddings.reject_inputs_containing("POISON")
    world.save("mythos", "c1", [message("A", "POISON harbour " + HALF, 1), message("B", HALF, 2)])
    flush(world.claim_all(), world.deps)
    assert world.points(COLLECTION) == {}
    embeddings.clear_faults()  # the model changed, say: the letter is queued for replay
    assert DeadLetters(world.redis).queue_replay(COLLECTION) == 1
    if new_text == "ok":
        empty(world, "A")  # too short now: it must leave the chunk
    else:
        edit(world, "A", new_text, 1)
    real_plan = workers.edits._plan

    def plan_then_replay(*args: Any) -> Any:
        plan = real_plan(*args)
        replay_now(world)  # between the round's look at the store and at the letters
        return plan

    monkeypatch.setattr(workers.edits, "_plan", plan_then_replay)
    pending = PendingEdits(world.redis)
    apply_edits(COLLECTION, world.deps, pending)
    monkeypatch.undo()
    for _ in range(3):  # the edit may wait a round; it must not be lost
        if not pending.pending(COLLECTION):
            break
        apply_edits(COLLECTION, world.deps, pending)
    found = texts_of(world)
    assert all("POISON" not in text for texts in found.values() for text in texts), found
    if new_text == "ok":
        assert set(found) == {"B"}
    else:
        assert len(found["A"]) == 1 and "lighthouse" in found["A"][0]
    assert len(found["B"]) == 1


def test_an_edit_of_a_message_both_stored_and_in_a_letter_reaches_the_letter(
    world: World, embeddings: EmbeddingServer
) -> None:
    """Review: an open chunk [A, B] is stored under A's id; it grows by C, and the grown chunk
    is refused: a letter [A, B, C] for the same point. An edit of A rewrote the stored point
    only (a chunk held A, so the letters were not looked at); the replay then wrote the
    letter's old text of A over it, and the edit was lost."""
    conversation = world.save("mythos", "c1", [message("A", "harbour lights", 1),
                                               message("B", "the lighthouse", 2)])  # fmt: skip
    world.flush_when_due()  # the open chunk, written under A's id and kept buffered
    [pid] = world.points(COLLECTION)
    embeddings.reject_inputs_containing("POISON")
    world.save("mythos", "c1", [message("C", "POISON in the bay", 3)])
    world.flush_when_due()
    [letter] = DeadLetters(world.redis).list()[1]
    assert letter.point_id == pid and world.buffered(conversation) == []
    embeddings.clear_faults()
    edit(world, "A", "the ferry was late", 1)
    pending = PendingEdits(world.redis)
    apply_edits(COLLECTION, world.deps, pending)
    assert DeadLetters(world.redis).queue_replay(COLLECTION) == 1
    replay_now(world)
    found = texts_of(world)
    assert set(found) == {"A", "B", "C"} and len(found["A"]) == 1, found
    assert "ferry" in found["A"][0] and "harbour" not in found["A"][0]

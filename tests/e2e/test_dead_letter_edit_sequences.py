"""Review, on both stores: a dead letter edited while a replay runs, a message emptied out of
it and brought back, another deleted and then edited, a replay after all that: each message
ends in exactly one chunk with its last text, or in none once deleted."""

from __future__ import annotations

import time

from shared.state import keys
from tests.e2e.test_edits import COLLECTION, holders, msg, points, save, stack, wait_for
from tests.support.embedding_server import EmbeddingServer
from tests.support.stack import Stack

__all__ = ["stack"]  # the fixture, on both stores

# ~200 characters each: three of them close a chunk (500), two do not
T1 = "Bartholomew fixed the old clock in the tower again today, and it chimed at noon. " * 2
T2 = "The rain kept falling over the quiet village all afternoon, and nobody went out. " * 2
T3 = "Zanzibar painted the little boat by the harbour this morning, a bright shade of blue. " * 2


def _edits_done(stack: Stack) -> None:
    wait_for(lambda: stack.runtime.redis.hlen(keys.edits(COLLECTION)) == 0)


def test_a_letter_edited_emptied_deleted_and_replayed_keeps_each_message_once(
    stack: Stack, embeddings: EmbeddingServer
) -> None:
    embeddings.reject_inputs_containing("POISON")
    save(stack, msg("m1", f"POISON {T1}", 1), msg("m2", T2, 2, user="2"),
         msg("m3", T3, 3, user="3"))  # fmt: skip
    stack.flush("mythos")
    [letter] = stack.client.get("/dead-letters").json()["entries"]
    assert letter["message_ids"] == ["m1", "m2", "m3"]
    r = stack.runtime.redis
    # an edit while a replay runs waits for it
    r.set(keys.REPLAY_LOCK, "a replay", px=60_000)
    assert save(stack, msg("m1", f"Corrected: {T1}", 1))["edited"] == 1
    time.sleep(1.0)
    assert r.hlen(keys.edits(COLLECTION)) == 1
    r.delete(keys.REPLAY_LOCK)
    _edits_done(stack)
    # m2 out of the letter, then back with a long text: its own chunk
    assert save(stack, msg("m2", "ok", 2, user="2"))["edited"] == 1
    _edits_done(stack)
    [letter] = stack.client.get("/dead-letters").json()["entries"]
    assert letter["message_ids"] == ["m1", "m3"]
    assert save(stack, msg("m2", f"Later: {T2}", 2, user="2"))["edited"] == 1
    _edits_done(stack)
    stack.flush("mythos")
    wait_for(lambda: "m2" in holders(stack))
    # m3 deleted out of the letter; an edit of it changes nothing
    deleted = stack.client.post("/agents/mythos/delete", json={"message_id": "m3"}).json()
    assert deleted["deleted_dead_letters"] == 1
    assert "edited" not in save(stack, msg("m3", f"Again: {T3}", 3, user="3"))
    [letter] = stack.client.get("/dead-letters").json()["entries"]
    assert letter["message_ids"] == ["m1"] and "POISON" not in letter["text"]
    embeddings.clear_faults()
    stack.client.post("/dead-letters/replay", json={"bot": "mythos"})
    wait_for(lambda: "m1" in holders(stack))
    stack.flush("mythos")
    found = holders(stack)
    assert set(found) == {"m1", "m2"} and all(len(p) == 1 for p in found.values()), found
    stored = points(stack)
    assert "Corrected" in stored[found["m1"][0]]["text"]
    assert "Later" in stored[found["m2"][0]]["text"]
    assert all("POISON" not in p["text"] and "Zanzibar" not in p["text"] for p in stored.values())
    assert stack.client.get("/dead-letters").json()["total"] == 0

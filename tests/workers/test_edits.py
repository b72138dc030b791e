"""The edit task's plain function (workers/edits.py) against real Redis, the embedding test
server and Qdrant Edge: outages keep edits waiting, a refused text keeps the old one, a
collection that is gone drops them."""

from __future__ import annotations

from typing import Any

import pytest

import workers.flush
from shared.errors import ModelMismatch, UpstreamUnavailable
from shared.format.fingerprint import text_fingerprint
from shared.format.messages import Message
from shared.format.naming import collection_name
from shared.state import keys
from shared.state.buffers import (
    AgentRef,
    ConversationSettings,
    SaveBatches,
    save_call,
    save_counts,
)
from shared.state.conversations import ConversationRef
from shared.state.edits import PendingEdits
from shared.state.scripts import SOURCES
from tests.support.buffer_save import IncomingMessage, buffer_save
from tests.support.embedding_server import EmbeddingServer
from tests.support.flush_world import HALF, SOURCE, World, message
from workers.edits import apply_edits
from workers.flush import FlushDeps, flush

COLLECTION = collection_name("mythos")


def written_chunk(world: World) -> str:
    """A and B in one closed, written chunk; returns its point id."""
    world.save("mythos", "c1", [message("A", "harbour " + HALF, 1), message("B", HALF, 2)])
    flush(world.claim_all(), world.deps)
    [pid] = world.points(COLLECTION)
    return pid


def edit(world: World, mid: str, text: str, n: int) -> None:
    """Re-send `mid` with `text`, as /save does; it must be counted an edit."""
    config = world.agent("mythos")
    ref = ConversationRef(collection=COLLECTION, source=SOURCE, channel_id="c1")
    conv = ConversationSettings(config.chunk_min_chars, config.chunk_gap_seconds,
                                config.idle_flush_seconds)  # fmt: skip
    changed = Message(id=mid, text=text, ts=message(mid, text, n).ts, speaker="Alex")
    counts = buffer_save(world.runtime.buffers, AgentRef("mythos", COLLECTION),
                         [IncomingMessage(ref, changed)], conv)  # fmt: skip
    assert counts.edited == 1


def empty(world: World, mid: str) -> None:
    """Re-send `mid` with a text too short to keep, as /save does: it leaves its chunk."""
    config = world.agent("mythos")
    ref = ConversationRef(collection=COLLECTION, source=SOURCE, channel_id="c1")
    conv = ConversationSettings(config.chunk_min_chars, config.chunk_gap_seconds,
                                config.idle_flush_seconds)  # fmt: skip
    batches = SaveBatches()
    line = message(mid, "ok", 0).to_json()  # only the text counts: an edit keeps the rest
    batches.batch(ref).append(mid, line, fingerprint=text_fingerprint("ok"), short=True)
    script = world.redis.register_script(SOURCES["save"])
    script_keys, args = save_call(AgentRef("mythos", COLLECTION), batches, conv,
                                  world.runtime.buffers.dedupe_ttl)  # fmt: skip
    assert save_counts(script(keys=script_keys, args=args)).edited == 1


def test_an_outage_keeps_the_edit_waiting(world: World, embeddings: EmbeddingServer) -> None:
    pid = written_chunk(world)
    edit(world, "A", "lighthouse " + HALF, 1)
    pending = PendingEdits(world.redis)
    assert pending.collections() == [COLLECTION]
    embeddings.fail_next(503, times=10)
    with pytest.raises(UpstreamUnavailable):
        apply_edits(COLLECTION, world.deps, pending)
    assert world.redis.hlen(keys.edits(COLLECTION)) == 1  # still waiting
    assert "harbour" in world.points(COLLECTION)[pid][0]["text"]
    embeddings.clear_faults()
    report = apply_edits(COLLECTION, world.deps, pending)
    assert (report.rewritten, report.left) == (1, 0)
    assert "lighthouse" in world.points(COLLECTION)[pid][0]["text"]
    assert pending.collections() == []


def test_a_text_the_provider_refuses_keeps_the_old_one(
    world: World, embeddings: EmbeddingServer
) -> None:
    pid = written_chunk(world)
    edit(world, "A", "POISON " + HALF, 1)
    embeddings.reject_inputs_containing("POISON")
    report = apply_edits(COLLECTION, world.deps, PendingEdits(world.redis))
    assert (report.rewritten, report.left) == (0, 0)
    assert "harbour" in world.points(COLLECTION)[pid][0]["text"]


def test_edits_of_a_collection_that_is_gone_are_dropped(world: World) -> None:
    written_chunk(world)
    edit(world, "A", "lighthouse " + HALF, 1)
    world.runtime.store.drop_collection(COLLECTION)
    report = apply_edits(COLLECTION, world.deps, PendingEdits(world.redis))
    assert (report.dropped, report.left) == (1, 0)
    assert world.redis.hlen(keys.edits(COLLECTION)) == 0


def test_an_open_chunk_emptied_at_its_head_during_a_flush_that_writes_nothing_is_retired(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review: a flush overtaken by the edit took back the points it knew of and then forgot
    the `retire` the edit had just set, so the open chunk's point kept the emptied text."""
    conversation = world.save("mythos", "c1", [message("A", "harbour lights", 1),
                                               message("B", "the lighthouse", 2)])  # fmt: skip
    world.flush_when_due()  # the open chunk, written under A's id and kept buffered
    [old] = world.points(COLLECTION)
    world.redis.zadd(keys.DUE, {conversation: 0})  # due again, nothing changed: no writes
    real_prepare = workers.flush._prepare

    def prepare_then_edit(*args: Any) -> Any:
        work = real_prepare(*args)
        empty(world, "A")  # between the flush's read and its commit
        return work

    monkeypatch.setattr(workers.flush, "_prepare", prepare_then_edit)
    flush(world.runtime.buffers.claim_due(10), world.deps)
    monkeypatch.undo()
    world.flush_when_due()  # due at once: the point is retired
    world.flush_when_due()  # quiet: [B] is written
    stored = world.points(COLLECTION)
    assert old not in stored
    assert [payload["messageIdList"] for payload, _ in stored.values()] == [["B"]]


def test_edits_wait_while_the_collection_has_another_model(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review: an edit queued before the model changed was embedded with the new model and
    written into the collection of the old one (its vectors mixed). Its writes are held:
    the edit waits, as a flush does, until the model fits again."""
    pid = written_chunk(world)
    edit(world, "A", "lighthouse " + HALF, 1)
    monkeypatch.setattr(world.runtime.embedder, "model", "another-model")
    held = FlushDeps.of(world.runtime)  # a process started with the new model
    pending = PendingEdits(world.redis)
    with pytest.raises(ModelMismatch):
        apply_edits(COLLECTION, held, pending)
    assert world.redis.hlen(keys.edits(COLLECTION)) == 1  # still waiting
    assert "harbour" in world.points(COLLECTION)[pid][0]["text"]
    assert world.redis.exists(keys.blocked(COLLECTION))  # /health says why
    monkeypatch.undo()
    report = apply_edits(COLLECTION, FlushDeps.of(world.runtime), pending)
    assert (report.rewritten, report.left) == (1, 0)
    assert "lighthouse" in world.points(COLLECTION)[pid][0]["text"]


def test_an_edit_back_without_the_emptied_record_is_dropped_as_readme_says(world: World) -> None:
    """README "Moving a pool": emptied records are not moved. After a move (the record gone,
    the dedupe mark moved) an edit back to a long text is counted edited but not stored."""
    written_chunk(world)
    empty(world, "A")
    pending = PendingEdits(world.redis)
    apply_edits(COLLECTION, world.deps, pending)
    assert world.redis.hexists(keys.emptied(COLLECTION), "discord:A")
    world.redis.delete(keys.emptied(COLLECTION))  # what an export and import leave behind
    edit(world, "A", "lighthouse " + HALF, 1)
    report = apply_edits(COLLECTION, world.deps, pending)
    assert (report.restored, report.dropped, report.left) == (0, 1, 0)
    stored = [payload["messageIdList"] for payload, _ in world.points(COLLECTION).values()]
    assert stored == [["B"]]

"""The flush function against real Redis, the embedding test server and a local-mode Qdrant."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from api.app import create_app
from shared.agents import AgentConfig, Agents
from shared.errors import DimensionMismatch
from shared.format.messages import Message
from shared.format.naming import collection_name, point_id
from shared.format.payload import chunk_text
from shared.settings import Settings
from shared.state import keys
from shared.state.buffers import AgentRef, Claim, ConversationSettings
from shared.state.conversations import ConversationRef
from shared.store.edge.engine import EdgeStore
from tests.support.buffer_save import IncomingMessage, buffer_save
from tests.support.embedding_server import EMBEDDING_DIMS, EmbeddingServer, embed_text
from tests.support.flush_world import (
    HALF,
    IDLE,
    SOURCE,
    World,
    message,
)
from workers.flush import BLOCKED_RETRY_SECONDS, FlushReport, flush

# Default rules: a chunk closes at 500 characters (text + speaker + 4) and 2 messages.
SHORT = "a short line about the harbour"
LONG = "the lighthouse keeper wrote the longest letter of his life " * 7  # 413 characters


def assert_point(point: tuple[dict[str, Any], list[float]], messages: Sequence[Message]) -> None:
    payload, vector = point
    text = chunk_text(messages)
    assert payload["text"] == text
    assert payload["messageIdList"] == [m.id for m in messages]
    assert payload["messageIds"] == ",".join(m.id for m in messages)
    assert payload["messageCount"] == len(messages)
    assert payload["timestamp"] == messages[0].ts
    assert payload["source"] == SOURCE
    assert payload["channelId"].startswith("c")
    assert payload["guildId"] == "g1"
    assert payload["isChunk"] is True
    assert vector == pytest.approx(embed_text(text, EMBEDDING_DIMS), abs=1e-6)


def assert_same_points(
    found: dict[str, tuple[dict[str, Any], list[float]]],
    expected: dict[str, tuple[dict[str, Any], list[float]]],
) -> None:
    """Same ids and payloads; vectors equal up to float32 rounding (Qdrant normalises them)."""
    assert set(found) == set(expected)
    for pid, (payload, vector) in expected.items():
        assert found[pid][0] == payload
        assert found[pid][1] == pytest.approx(vector, abs=1e-6)


# --------------------------------------------------------------------------- 1. open chunk


def test_open_chunk_is_written_when_idle_then_grows_in_place(
    world: World, embeddings: EmbeddingServer
) -> None:
    msgs = [message(f"m{i}", f"{SHORT} number {i}", i) for i in range(1, 5)]
    pid = point_id("mem_mythos", SOURCE, "m1")

    conv = world.save("mythos", "c1", msgs[:2])
    assert world.runtime.buffers.claim_due(100) == []  # not due before the idle timer
    report = world.flush_when_due()
    assert (report.conversations, report.chunks_written) == (1, 1)
    points = world.points("mem_mythos")
    assert list(points) == [pid]
    assert_point(points[pid], msgs[:2])
    # The open chunk stays buffered, marked as written, and nothing is due any more.
    assert world.buffered(conv) == ["m1", "m2"]
    assert world.meta(conv)["written"] == "2"
    assert world.due(conv) is None

    # A flush before the idle timer writes nothing: the point is not rewritten per message.
    world.save("mythos", "c1", msgs[2:3])
    embeddings.reset_log()
    report = flush(world.claim_all(), world.deps)
    assert report.chunks_written == 0
    assert embeddings.requests == []
    assert world.points("mem_mythos")[pid][0]["messageCount"] == 2

    world.save("mythos", "c1", msgs[3:4])
    report = world.flush_when_due()
    assert report.chunks_written == 1
    assert [r.n_inputs for r in embeddings.requests] == [1]
    points = world.points("mem_mythos")
    assert list(points) == [pid]  # same id, new text and vector
    assert_point(points[pid], msgs[:4])
    assert world.buffered(conv) == ["m1", "m2", "m3", "m4"]
    assert world.meta(conv)["written"] == "4"
    assert world.due(conv) is None

    # A long message closes the chunk; the next one opens a new chunk.
    closing = message("m5", LONG, 5)
    after = message("m6", f"{SHORT} after the close", 6)
    world.save("mythos", "c1", [closing, after])
    report = flush(world.runtime.buffers.claim_due(100), world.deps)  # due at once: it closed
    assert report.chunks_written == 1
    points = world.points("mem_mythos")
    assert list(points) == [pid]
    assert_point(points[pid], [*msgs, closing])
    assert world.buffered(conv) == ["m6"]
    meta = world.meta(conv)
    assert meta["written"] == "0"
    assert int(meta["chars"]) == after.size
    assert world.due(conv) == int(meta["last"]) + IDLE * 1000

    report = world.flush_when_due()
    assert report.chunks_written == 1
    points = world.points("mem_mythos")
    new_pid = point_id("mem_mythos", SOURCE, "m6")
    assert set(points) == {pid, new_pid}
    assert_point(points[new_pid], [after])
    stored = sorted(mid for payload, _ in points.values() for mid in payload["messageIdList"])
    assert stored == ["m1", "m2", "m3", "m4", "m5", "m6"]  # every message exactly once
    assert world.buffered(conv) == ["m6"]
    assert world.meta(conv)["written"] == "1"
    assert world.due(conv) is None


# --------------------------------------------------------------------------- 2. batching


def test_ready_chunks_of_many_conversations_share_one_embedding_request(
    world: World, embeddings: EmbeddingServer
) -> None:
    world.runtime.embedder.dimensions()  # the one-off size probe is not part of the flush
    embeddings.reset_log()
    conversations = {}
    for c in range(10):
        agent = "mythos" if c % 2 else "polaris"
        msgs = [message(f"c{c}-{i}", f"{HALF} {c}-{i}", i) for i in range(5)]
        conversations[world.save(agent, f"c{c}", msgs)] = (agent, msgs)

    claims = world.claim_all()
    assert len(claims) == 10
    report = flush(claims, world.deps)

    assert report.conversations == 10
    assert report.chunks_written == 20
    assert [r.n_inputs for r in embeddings.requests] == [20]
    assert [r.status for r in embeddings.requests] == [200]
    for collection in ("mem_mythos", "mem_polaris"):
        assert len(world.points(collection)) == 10
    for conv, (agent, msgs) in conversations.items():
        points = world.points(f"mem_{agent}")
        for pair in (msgs[0:2], msgs[2:4]):
            assert_point(points[point_id(f"mem_{agent}", SOURCE, pair[0].id)], pair)
        assert world.buffered(conv) == [msgs[4].id]  # the open chunk waits for its idle timer
        assert world.meta(conv)["written"] == "0"
        assert world.due(conv) == int(world.meta(conv)["last"]) + IDLE * 1000
        assert world.redis.exists(keys.lease(conv)) == 0


# --------------------------------------------------------------------------- 3. repeatable


def test_a_flush_that_dies_after_upsert_runs_again_without_duplicates(
    make_world: Callable[..., World], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The open chunk must not go idle between the two flushes: on a loaded machine the
    # fixture's half second ran out, and the second flush wrote it too (3 chunks, seen here).
    world = make_world(AgentConfig(name="mythos", idle_flush_seconds=60))
    msgs = [message(f"m{i}", f"{HALF} {i}", i) for i in range(5)]
    conv = world.save("mythos", "c1", msgs)
    claims = world.claim_all()

    def crash(*args: object, **kwargs: object) -> int:
        # A death, not an error: a flush sets an erring conversation aside (and carries on),
        # but a killed worker stops where it is.
        raise KeyboardInterrupt("worker died before commit")

    monkeypatch.setattr(world.runtime.buffers, "commit", crash)
    with pytest.raises(KeyboardInterrupt):
        flush(claims, world.deps)
    monkeypatch.undo()
    first = world.points("mem_mythos")
    assert len(first) == 2
    assert world.buffered(conv) == [m.id for m in msgs]  # nothing committed

    # The lease expires (deleted here to save the wait) and the sweep hands the work on.
    world.redis.delete(keys.lease(conv))
    again = world.claim_all()
    assert [c.conversation for c in again] == [conv]
    report = flush(again, world.deps)
    assert report.chunks_written == 2
    assert_same_points(world.points("mem_mythos"), first)
    assert world.buffered(conv) == ["m4"]

    # The first claim delivered again (Celery redelivery) is a no-op.
    assert flush(claims, world.deps) == FlushReport()
    assert flush(again, world.deps) == FlushReport()
    assert_same_points(world.points("mem_mythos"), first)
    assert world.buffered(conv) == ["m4"]


def test_writing_the_same_open_chunk_twice_keeps_one_point(world: World) -> None:
    msgs = [message("m1", SHORT, 1), message("m2", SHORT + " again", 2)]
    conv = world.save("mythos", "c1", msgs)
    world.flush_when_due()
    first = world.points("mem_mythos")
    # Lose the record of the write (a commit that never happened) and flush again.
    world.redis.hset(keys.meta(conv), "written", 0)
    world.runtime.buffers.force_flush("mem_mythos")
    report = flush(world.runtime.buffers.claim_due(100), world.deps)
    assert report.chunks_written == 1
    assert_same_points(world.points("mem_mythos"), first)
    assert world.meta(conv)["written"] == "2"


# --------------------------------------------------------------------------- 4. mismatches


def steady(make_world: Callable[..., World]) -> World:
    """mythos and polaris with an idle timer no test outlasts: their open chunks wait however
    slow the machine (the fixture's half second ran out under load, and one more chunk was
    written than these tests expect)."""
    return make_world(
        AgentConfig(name="mythos", idle_flush_seconds=60),
        AgentConfig(name="polaris", idle_flush_seconds=60),
    )


def _flush_blocked_and_healthy(world: World) -> tuple[str, str]:
    blocked_msgs = [message(f"b{i}", f"{HALF} {i}", i) for i in range(3)]
    healthy_msgs = [message(f"h{i}", f"{HALF} {i}", i) for i in range(3)]
    blocked = world.save("mythos", "c1", blocked_msgs)
    healthy = world.save("polaris", "c1", healthy_msgs)
    claims = world.claim_all()
    assert len(claims) == 2
    before = int(time.time() * 1000)
    report = flush(claims, world.deps)
    assert (report.conversations, report.chunks_written) == (1, 1)
    # The healthy agent is written in the same flush.
    assert list(world.points("mem_polaris")) == [point_id("mem_polaris", SOURCE, "h0")]
    assert world.buffered(healthy) == ["h2"]
    # The blocked one writes nothing and keeps everything buffered, looked at again later.
    assert world.points("mem_mythos") == {}
    assert world.buffered(blocked) == ["b0", "b1", "b2"]
    assert world.meta(blocked).get("written", "0") == "0"
    assert "attempts" not in world.meta(blocked)
    assert world.redis.exists(keys.lease(blocked)) == 0
    due = world.due(blocked)
    assert due is not None and due >= before + BLOCKED_RETRY_SECONDS * 1000
    return blocked, healthy


def _drop(world: World, name: str) -> None:
    store = world.runtime.store
    assert isinstance(store, EdgeStore)
    store.drop_collection(name)


def _assert_save_answers(world: World, settings: Settings, bot: str, status: int) -> None:
    body = {"bot": bot, "messages": [{"message_id": "late", "text": "a later message"}]}
    with TestClient(create_app(settings, runtime=world.runtime)) as client:
        response = client.post("/save", json=body)
    assert response.status_code == status, response.text
    if status == 409:
        assert response.json()["error"] == "agent_blocked"


def test_collection_of_another_size_holds_the_agent_and_not_the_others(
    make_world: Callable[..., World], settings: Settings
) -> None:
    # serve's store (Qdrant Edge) with the collection made at another size
    made = EdgeStore(settings.data_dir / "edge", optimize_in_background=False)
    made.create("mem_mythos", size=64, model=None)
    made.close()
    world = steady(make_world)

    _flush_blocked_and_healthy(world)

    reason = world.redis.get(keys.blocked(collection_name("mythos"))).decode()
    assert "size 64" in reason and f"gives {EMBEDDING_DIMS}" in reason
    assert world.redis.get(keys.blocked(collection_name("polaris"))) is None
    assert world.runtime.store.collection("mem_mythos").size == 64  # left as it was
    _assert_save_answers(world, settings, "mythos", 409)
    _assert_save_answers(world, settings, "polaris", 202)


def test_collection_of_another_model_holds_the_agent_until_fixed(
    make_world: Callable[..., World], settings: Settings
) -> None:
    world = steady(make_world)
    world.runtime.store.ensure_collection("mem_mythos", size=EMBEDDING_DIMS, model="other-model")

    blocked, _ = _flush_blocked_and_healthy(world)

    reason = world.redis.get(keys.blocked(collection_name("mythos"))).decode()
    assert "other-model" in reason and "text-embedding-3-small" in reason
    _assert_save_answers(world, settings, "mythos", 409)
    assert world.buffered(blocked) == ["b0", "b1", "b2"]  # the refused /save added nothing

    # Fixing the collection lets the held messages through, without a restart.
    _drop(world, "mem_mythos")
    report = flush(world.claim_all(), world.deps)
    assert report.chunks_written == 1
    assert world.redis.get(keys.blocked(collection_name("mythos"))) is None
    assert list(world.points("mem_mythos")) == [point_id("mem_mythos", SOURCE, "b0")]
    assert world.buffered(blocked) == ["b2"]


# --------------------------------------------------------------------------- 5. provider errors


def test_rate_limit_releases_with_retry_after_and_loses_nothing(
    make_world: Callable[..., World], embeddings: EmbeddingServer
) -> None:
    world = steady(make_world)
    world.runtime.embedder.dimensions()
    convs = {
        world.save("mythos", f"c{c}", [message(f"c{c}-{i}", f"{HALF} {i}", i) for i in range(3)])
        for c in range(2)
    }
    claims = world.claim_all()
    embeddings.fail_next(429, retry_after=2)
    before = int(time.time() * 1000)
    report = flush(claims, world.deps)
    after = time.time() * 1000

    assert report.retried == 2 and report.chunks_written == 0
    assert world.points("mem_mythos") == {}
    for conv in convs:
        assert world.redis.exists(keys.lease(conv)) == 0
        due = world.due(conv)
        assert due is not None and before + 2000 <= due <= after + 2000
        assert len(world.buffered(conv)) == 3
        assert world.meta(conv)["attempts"] == "1"
    assert world.runtime.buffers.claim_due(100) == []  # not before Retry-After

    report = flush(world.claim_all(), world.deps)
    assert report.chunks_written == 2
    points = world.points("mem_mythos")
    stored = sorted(mid for payload, _ in points.values() for mid in payload["messageIdList"])
    assert stored == ["c0-0", "c0-1", "c1-0", "c1-1"]
    for conv in convs:
        assert len(world.buffered(conv)) == 1
        assert "attempts" not in world.meta(conv)


def test_an_input_rejected_for_good_is_dead_lettered_and_the_rest_stored(
    world: World, embeddings: EmbeddingServer
) -> None:
    texts = [f"{HALF} 0", f"{HALF} 1", f"{HALF} POISON 2", f"{HALF} 3", f"{HALF} 4"]
    poisoned = world.save("mythos", "c1", [message(f"p{i}", t, i) for i, t in enumerate(texts)])
    clean = world.save("polaris", "c1", [message(f"q{i}", f"{HALF} {i}", i) for i in range(2)])
    embeddings.reject_inputs_containing("POISON")

    report = flush(world.claim_all(), world.deps)

    assert (report.chunks_written, report.dead_letters, report.retried) == (2, 1, 0)
    assert list(world.points("mem_mythos")) == [point_id("mem_mythos", SOURCE, "p0")]
    assert list(world.points("mem_polaris")) == [point_id("mem_polaris", SOURCE, "q0")]
    letters = [json.loads(raw) for raw in world.redis.lrange(keys.DEAD_LETTERS, 0, -1)]
    assert len(letters) == 1
    letter = letters[0]
    assert letter["agent"] == "mythos"
    assert letter["collection"] == "mem_mythos"
    assert letter["conversation"] == poisoned
    assert letter["point_id"] == point_id("mem_mythos", SOURCE, "p2")
    assert "POISON" in letter["reason"]
    assert letter["payload"]["messageIdList"] == ["p2", "p3"]
    assert "POISON" in letter["payload"]["text"]
    assert world.buffered(poisoned) == ["p4"]  # the poisoned chunk left the buffer
    assert world.buffered(clean) == []
    assert world.due(clean) is None


def test_a_rejected_open_chunk_leaves_the_buffer(world: World, embeddings: EmbeddingServer) -> None:
    conv = world.save("mythos", "c1", [message("m1", "POISON in an open chunk", 1)])
    embeddings.reject_inputs_containing("POISON")
    world.runtime.buffers.force_flush("mem_mythos")
    report = flush(world.runtime.buffers.claim_due(100), world.deps)
    assert (report.chunks_written, report.dead_letters) == (0, 1)
    letter = json.loads(world.redis.lindex(keys.DEAD_LETTERS, 0))
    assert letter["payload"]["messageIdList"] == ["m1"]
    assert world.buffered(conv) == []
    assert world.meta(conv)["chars"] == "0"
    assert world.due(conv) is None
    assert world.runtime.buffers.unwritten([conv]) == 0


# --------------------------------------------------------------------------- races


def test_a_force_flush_during_a_flush_is_not_lost(
    make_world: Callable[..., World], monkeypatch: pytest.MonkeyPatch
) -> None:
    world = make_world(AgentConfig(name="mythos", idle_flush_seconds=60))
    # Big enough to be due at once, yet open: a question waits for its reply.
    question = "and after all those pages, what did the keeper answer? " * 2
    msgs = [message("m1", LONG, 1), message("m2", question.strip(), 2)]
    conv = world.save("mythos", "c1", msgs)
    buffers = world.runtime.buffers
    assert world.due(conv) is not None and world.due(conv) <= time.time() * 1000
    begin = buffers.begin

    def begin_then_force(claim: Claim) -> Any:
        state = begin(claim)
        buffers.force_flush("mem_mythos")  # POST /agents/mythos/flush right after the read
        return state

    monkeypatch.setattr(buffers, "begin", begin_then_force)
    claims = buffers.claim_due(100)
    assert len(claims) == 1
    report = flush(claims, world.deps)
    monkeypatch.undo()
    assert (report.conversations, report.chunks_written) == (1, 0)  # saw no force, not idle

    # The force still stands: the open chunk is written by the next sweep, not in 60 s.
    assert world.due(conv) is not None and world.due(conv) <= time.time() * 1000
    report = flush(buffers.claim_due(100), world.deps)
    assert report.chunks_written == 1
    assert_point(world.points("mem_mythos")[point_id("mem_mythos", SOURCE, "m1")], msgs)
    assert buffers.unwritten([conv]) == 0
    assert world.due(conv) is None


def test_an_agent_removed_from_the_agents_file_keeps_its_messages(world: World) -> None:
    conversation = world.save("mythos", "c1", [message("g1", "x" * 600, 1), message("g2", "y", 2)])
    # The operator removes the agent from the agents file; the buffered messages remain.
    world.deps.agents = Agents([AgentConfig(name="polaris")], accept_unlisted=False)
    before = int(time.time() * 1000)  # whole ms, as the scripts keep time
    report = flush(world.claim_all(), world.deps)
    assert report.chunks_written == 0
    assert world.points("mem_mythos") == {}
    assert world.buffered(conversation) == ["g1", "g2"]
    assert world.due(conversation) >= before + BLOCKED_RETRY_SECONDS * 1000
    assert world.redis.get(keys.lease(conversation)) is None  # handed back, not left to expire


# --- races with deletes and dead workers (each once lost or resurrected messages) ----------


def stored_ids(world: World, collection: str = "mem_mythos") -> list[str]:
    return sorted(m for payload, _ in world.points(collection).values()
                  for m in payload["messageIdList"])  # fmt: skip


def run_until_quiet(world: World) -> None:
    """Let the write path settle: flush whatever becomes due, forcing open chunks out."""
    world.runtime.buffers.force_flush("mem_mythos")
    for _ in range(6):
        claims = world.claim_all()
        if claims:
            flush(claims, world.deps)


def delete_message(world: World, message_id: str) -> None:
    from shared.memories.deletes import DeleteScope, delete

    delete(world.runtime, world.agent("mythos"), DeleteScope(message_id=message_id))


def before_upsert(world: World, monkeypatch: pytest.MonkeyPatch, hook: Callable[[], None]) -> None:
    real = world.runtime.store.upsert
    pending = [hook]

    def upsert(name: str, points: Sequence[Any]) -> None:
        if pending:
            pending.pop()()
        real(name, points)

    monkeypatch.setattr(world.runtime.store, "upsert", upsert)


def test_a_delete_during_a_flush_keeps_the_rest_of_the_chunk(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    conv = world.save("mythos", "c1", [message("A", "hello harbour", 1), message("B", "hi", 2)])
    world.runtime.buffers.force_flush("mem_mythos")
    flush(world.claim_all(), world.deps)  # the open chunk [A, B] is stored, and stays open
    world.save("mythos", "c1", [message("C", "x" * 480, 3)])  # closes the chunk [A, B, C]
    before_upsert(world, monkeypatch, lambda: delete_message(world, "C"))
    flush(world.claim_all(), world.deps)  # overtaken by the delete: takes its point back
    run_until_quiet(world)
    assert stored_ids(world) == ["A", "B"]
    assert world.buffered(conv) == ["A", "B"] and world.meta(conv)["written"] == "2"


def test_a_flush_that_wrote_nothing_does_not_let_a_delete_miss_the_open_chunk(
    world: World,
) -> None:
    conv = world.save("mythos", "c1", [message("A", "hello harbour", 1), message("B", "hi", 2)])
    world.runtime.buffers.force_flush("mem_mythos")
    flush(world.claim_all(), world.deps)  # [A, B] stored as the open chunk
    world.save("mythos", "c1", [message("C", "and then?", 3)])
    flush(world.claim_all(), world.deps)  # not idle: writes nothing, [A, B] is still stored
    assert world.meta(conv)["written"] == "2"
    delete_message(world, "B")  # its point goes at once; A stays, written again with C
    run_until_quiet(world)
    assert stored_ids(world) == ["A", "C"]
    ttls = [world.redis.ttl(keys.seen(collection_name("mythos"), SOURCE, m)) for m in "AB"]
    assert ttls[0] > 0 and ttls[1] == -1  # only B is tombstoned for good


def test_a_worker_killed_after_its_upsert_is_taken_back_after_a_delete(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    conv = world.save("mythos", "c1", [message("A", "hello harbour", 1), message("B", "hi", 2)])
    world.runtime.buffers.force_flush("mem_mythos")
    flush(world.claim_all(), world.deps)
    world.save("mythos", "c1", [message("C", "x" * 480, 3)])
    real = world.runtime.store.upsert

    def upsert_then_die(name: str, points: Sequence[Any]) -> None:
        real(name, points)
        raise KeyboardInterrupt  # the worker dies here: points written, no commit

    monkeypatch.setattr(world.runtime.store, "upsert", upsert_then_die)
    with pytest.raises(KeyboardInterrupt):
        flush(world.claim_all(), world.deps)
    monkeypatch.setattr(world.runtime.store, "upsert", real)
    assert stored_ids(world) == ["A", "B", "C"]
    # The stored chunk holding C is [A, B, C], a copy of the buffer (the dead flush's): it
    # goes, and A and B, still buffered, are written again without C.
    delete_message(world, "C")
    world.redis.delete(keys.lease(conv))  # the dead worker's lease expires
    run_until_quiet(world)
    assert stored_ids(world) == ["A", "B"]
    assert world.buffered(conv) == ["A", "B"]
    ttls = [world.redis.ttl(keys.seen(collection_name("mythos"), SOURCE, m)) for m in "ABC"]
    assert ttls[0] > 0 and ttls[1] > 0 and ttls[2] == -1  # C is never stored again


def test_an_import_conversation_is_not_flushed_again_and_again(world: World) -> None:
    config = world.agent("mythos")
    ref = ConversationRef(config.collection_name, "sillytavern", conversation_id="chat.jsonl")
    conv_settings = ConversationSettings(
        min_chars=config.chunk_min_chars, gap_seconds=config.chunk_gap_seconds,
        idle_seconds=3600, idle_timer=False,
    )  # fmt: skip
    first = [IncomingMessage(ref, message("i1", "hello", 1))]
    buffer_save(world.runtime.buffers, AgentRef("mythos", "mem_mythos"), first, conv_settings)
    world.make_due()
    flush(world.runtime.buffers.claim_due(10), world.deps)  # nothing to write yet
    time.sleep(IDLE * 2)  # past the agent's idle timer, which imports do not have
    assert world.runtime.buffers.claim_due(10) == []
    assert world.due(ref.key) > time.time() * 1000 + 3000 * 1000


@pytest.mark.parametrize("delete_first", [False, True], ids=["plain-kill", "delete-then-kill"])
def test_a_dead_flush_is_taken_back_by_the_next_one(
    world: World, monkeypatch: pytest.MonkeyPatch, delete_first: bool
) -> None:
    # X and Y make one closed chunk, written at once under X's id.
    conv = world.save(
        "mythos", "c1", [message("X", "hello harbour", 1), message("Y", "y" * 480, 2)]
    )
    real = world.runtime.store.upsert

    def upsert_then_die(name: str, points: Sequence[Any]) -> None:
        if delete_first:  # the delete finds no point holding X yet: then the worker writes one
            delete_message(world, "X")
        real(name, points)
        raise KeyboardInterrupt  # and dies before its commit

    monkeypatch.setattr(world.runtime.store, "upsert", upsert_then_die)
    with pytest.raises(KeyboardInterrupt):
        flush(world.claim_all(), world.deps)
    monkeypatch.setattr(world.runtime.store, "upsert", real)
    assert stored_ids(world) == ["X", "Y"]
    world.redis.delete(keys.lease(conv))  # the dead worker's lease expires
    run_until_quiet(world)
    # Without taking the dead flush's point back, X (deleted) would stay stored under its id.
    assert stored_ids(world) == (["Y"] if delete_first else ["X", "Y"])
    assert "inflight" not in world.meta(conv)


def test_new_messages_do_not_cut_a_backoff_short(world: World, embeddings: EmbeddingServer) -> None:
    conv = world.save("mythos", "c1", [message("b1", "x" * 300, 1), message("b2", "y" * 300, 2)])
    embeddings.fail_next(429, retry_after=30)
    assert flush(world.claim_all(), world.deps).retried == 1
    retry_at = world.due(conv)
    world.save("mythos", "c1", [message("b3", "z" * 600, 3)])  # a closable chunk: "due now"
    assert world.due(conv) == retry_at  # still waits for the provider's Retry-After
    assert world.runtime.buffers.claim_due(10) == []


def test_a_collection_deleted_under_memory_pool_is_created_again(world: World) -> None:
    world.save("mythos", "c1", [message("d1", "x" * 300, 1), message("d2", "y" * 300, 2)])
    flush(world.claim_all(), world.deps)
    assert stored_ids(world) == ["d1", "d2"]
    _drop(world, "mem_mythos")  # an operator's mistake
    world.save("mythos", "c1", [message("d3", "x" * 300, 3), message("d4", "y" * 300, 4)])
    report = flush(world.claim_all(), world.deps)
    assert report.retried == 1 and report.chunks_written == 0
    world.redis.zadd(keys.DUE, {k: 0 for k in world.redis.zrange(keys.DUE, 0, -1)})
    flush(world.runtime.buffers.claim_due(10), world.deps)
    assert stored_ids(world) == ["d3", "d4"]  # d1, d2 went with the collection itself


def test_a_rejected_chunk_text_stays_out_of_the_log(
    world: World, embeddings: EmbeddingServer, caplog: pytest.LogCaptureFixture
) -> None:
    # The test server, like some providers, quotes the refused input in its reason.
    world.save("mythos", "c1", [message("m1", "POISON and a private confession", 1)])
    embeddings.reject_inputs_containing("POISON")
    world.runtime.buffers.force_flush("mem_mythos")
    with caplog.at_level(logging.INFO):
        report = flush(world.runtime.buffers.claim_due(100), world.deps)
    assert report.dead_letters == 1
    assert caplog.records and "private confession" not in caplog.text
    assert "POISON" not in caplog.text


# --------------------------------------------------------------------------- the step guard


def test_redis_failing_while_a_held_conversation_is_released_fails_the_task(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Releasing a held conversation is the flush's own bookkeeping: Redis failing there is no
    # conversation's fault, so the task fails (and is counted an error), as it always did.
    world.save("mythos", "c1", [message(f"c1-{i}", f"{HALF} {i}", i) for i in range(3)])

    def other_size(_: str) -> None:
        raise DimensionMismatch("the collection holds vectors of size 64")

    def redis_gone(*_: object, **__: object) -> None:
        raise redis.ConnectionError("Redis went away")

    monkeypatch.setattr(world.deps.collections, "ensure", other_size)
    monkeypatch.setattr(world.deps.buffers, "release", redis_gone)
    with pytest.raises(redis.ConnectionError):
        flush(world.claim_all(), world.deps)


def test_a_conversation_hash_that_cannot_be_read_is_quarantined_with_its_agent(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    # A broken hash fails the same way on every try: it is set aside at once (before the
    # step guard it could not even be set aside and came back at every lease expiry).
    conv = world.save("mythos", "c1", [message(f"c1-{i}", f"{HALF} {i}", i) for i in range(3)])
    healthy = world.save("mythos", "c2", [message(f"c2-{i}", f"{HALF} {i}", i) for i in range(3)])
    world.redis.hset(keys.meta(conv), "inflight", "not json")
    with caplog.at_level(logging.ERROR, logger="workers.isolation"):
        report = flush(world.claim_all(), world.deps)
    assert report.quarantined == 1 and report.conversations == 1
    assert world.buffered(healthy) == ["c2-2"]
    assert "agent 'mythos'" in caplog.text

"""One bad conversation never holds back another: the flush against real Redis, the embedding
test server and both Qdrant paths (local mode and the REST test server).

Each poison is written into Redis as the code before the door stored it (support/legacy.py) and
flushed in one task with a victim: the victim is written, the poisoner is set aside alone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import qdrant_edge as edge
from celery.exceptions import SoftTimeLimitExceeded
from qdrant_client import models
from qdrant_client.http.exceptions import UnexpectedResponse

import workers.flush
from shared.agents import AgentConfig, Agents
from shared.format.messages import Message
from shared.runtime import Runtime
from shared.state import keys
from shared.state.buffer_deletes import BufferDeletes, BufferScope
from shared.state.buffers import AgentRef, Claim, ConversationSettings
from shared.state.conversations import ConversationRef
from shared.state.quarantine import FailOutcome, Quarantine
from shared.store.edge.engine import EdgeStore
from shared.store.qdrant.engine import QdrantStore
from tests.support.buffer_save import IncomingMessage, buffer_save
from tests.support.embedding_server import EMBEDDING_DIMS, EmbeddingServer
from tests.support.legacy import BASE_TS, MICROSECONDS_TS, SOURCE, buffer_legacy, record
from tests.support.qdrant_server import QdrantTestServer
from tests.support.stack import stack_settings
from workers.failures import UNKNOWN_FAILURES_ALLOWED
from workers.flush import FlushDeps, FlushReport, flush

TEXT = "the keeper wrote down every ship that passed the harbour lights that night"
HOUR_MS = 3_600_000


@dataclass
class World:
    runtime: Runtime
    deps: FlushDeps

    @property
    def redis(self) -> Any:
        return self.runtime.redis

    @property
    def quarantine(self) -> Quarantine:
        return Quarantine(self.redis)

    def save_victim(self, channel: str = "v1", n: int = 2) -> str:
        """The victim's messages through the real save script; its open chunk forced out."""
        agent = self.runtime.agents.get("victim")
        ref = ConversationRef(agent.collection_name, SOURCE, channel_id=channel)
        messages = [
            Message(f"{channel}-{i}", f"{TEXT} {i}", BASE_TS + i * 1000, "Alex", "111")
            for i in range(n)
        ]
        conv = ConversationSettings(min_chars=500, gap_seconds=3600, idle_seconds=600)
        who = AgentRef(agent.name, agent.collection_name)
        buffer_save(self.runtime.buffers, who, [IncomingMessage(ref, m) for m in messages], conv)
        self.runtime.buffers.force_flush(agent.collection_name)
        return ref.key

    def legacy(self, agent: str, collection: str, channel: str, *records: dict) -> str:
        key = buffer_legacy(
            self.redis, agent=agent, collection=collection, channel=channel, records=list(records)
        )
        # Quiet for an hour: its open chunk is due to be written (idle timer long past).
        self.redis.hset(keys.meta(key), "last", int(time.time() * 1000) - HOUR_MS)
        return key

    def claim_all(self) -> list[Claim]:
        members = self.redis.zrange(keys.DUE, 0, -1)
        if members:
            self.redis.zadd(keys.DUE, dict.fromkeys(members, 0))
        return self.runtime.buffers.claim_due(100)

    def flush_all(self) -> tuple[list[str], FlushReport]:
        """One flush task for everything due, as the scheduler would batch it."""
        claims = self.claim_all()
        return [c.conversation for c in claims], flush(claims, self.deps)

    def stored_ids(self, collection: str) -> list[list[str]]:
        if self.runtime.store.collection(collection) is None:
            return []
        payloads = self.runtime.store.scroll_payloads(collection)
        return sorted(list(payload["messageIdList"]) for _, payload in payloads)

    def buffered(self, conversation: str) -> int:
        return int(self.redis.llen(keys.buffer(conversation)))

    def meta(self, conversation: str) -> dict[str, str]:
        raw = self.redis.hgetall(keys.meta(conversation))
        return {k.decode(): v.decode() for k, v in raw.items()}

    def quarantined(self) -> list[str]:
        return [member for member, _ in self.quarantine.members()]


@pytest.fixture(params=["edge", "server"])
def make_world(
    request: pytest.FixtureRequest, redis_url: str, embeddings: EmbeddingServer, tmp_path: Path
) -> Iterator[Callable[[], World]]:
    with ExitStack() as stack:
        extra = {}
        if request.param == "server":
            server = stack.enter_context(QdrantTestServer(tmp_path / "qdrant-server"))
            extra["QDRANT_URL"] = server.url
        settings = stack_settings(redis_url, embeddings.url, tmp_path, **extra)

        def make() -> World:
            agents = Agents([AgentConfig(name="victim")], accept_unlisted=True)
            runtime = Runtime.build(settings, agents=agents)
            stack.callback(runtime.close)
            return World(runtime, FlushDeps.of(runtime))

        yield make


@pytest.fixture
def world(make_world: Callable[[], World]) -> World:
    return make_world()


def test_a_date_beyond_year_9999_is_quarantined_and_the_victim_written(world: World) -> None:
    # Observed: `ts` in microseconds (year 56411) failed every flush task it was batched in
    # ("year 56411 is out of range"), so `victim`'s chunk stayed unwritten for minutes.
    poisoner = world.legacy(
        "poisoner",
        "mem_poisoner",
        "p",
        record("p1", MICROSECONDS_TS),
        record("p2", MICROSECONDS_TS + 1),
    )
    victim = world.save_victim()
    claimed, report = world.flush_all()

    assert sorted(claimed) == sorted([poisoner, victim])  # one task held both
    assert world.stored_ids("mem_victim") == [["v1-0", "v1-1"]]
    assert world.meta(victim)["written"] == "2"
    assert report.quarantined == 1
    assert world.quarantined() == [poisoner]
    assert "year" in world.meta(poisoner)["quarantined"]
    assert world.buffered(poisoner) == 2  # its messages are kept
    assert world.redis.zscore(keys.DUE, poisoner) is None
    assert world.redis.exists(keys.lease(poisoner)) == 0

    # Due again (a save, a force flush): it is never claimed while quarantined.
    world.runtime.buffers.force_flush("mem_poisoner")
    assert world.runtime.buffers.claim_due(100) == []
    assert world.redis.zscore(keys.DUE, poisoner) is None


def test_an_agent_name_no_collection_can_have_is_quarantined_at_once(world: World) -> None:
    # Observed: a 1,024-character bot name (accepted before the door) made Qdrant refuse its
    # collection, and agents batched with it got no points for 10 minutes.
    name = "b" * 1024
    poisoner = world.legacy(name, "mem_" + "b" * 1020, "p", record("b1", BASE_TS))
    victim = world.save_victim()
    _, report = world.flush_all()

    assert world.stored_ids("mem_victim") == [["v1-0", "v1-1"]]
    assert world.meta(victim)["written"] == "2"
    assert report.quarantined == 1
    [entry] = world.quarantine.entries(world.quarantine.members())
    assert entry.conversation == poisoner
    assert entry.reason.startswith("InvalidAgentName: agent name")
    assert entry.messages == 1 and entry.agent == name


def test_an_unforeseen_failure_is_retried_with_backoff_then_quarantined(world: World) -> None:
    # A buffered record without its time: KeyError, which no rule foresees. Retried, never in
    # a hot loop, and quarantined at the third failure in a row; the victim is written at once.
    broken = {"i": "k1", "t": TEXT, "s": "Alex", "z": 80}
    poisoner = world.legacy("broken", "mem_broken", "p", broken)
    victim = world.save_victim()
    for attempt in range(1, UNKNOWN_FAILURES_ALLOWED):
        before = int(time.time() * 1000)
        _, report = world.flush_all()
        assert report.quarantined == 0 and report.retried == 1
        assert world.meta(poisoner)["failures"] == str(attempt)
        assert world.redis.zscore(keys.DUE, poisoner) >= before + 1000  # backs off
        assert world.quarantined() == []
    assert world.stored_ids("mem_victim") == [["v1-0", "v1-1"]]
    _, report = world.flush_all()
    assert report.quarantined == 1
    assert world.quarantined() == [poisoner]
    assert world.meta(poisoner)["quarantined"].startswith("KeyError")
    assert world.meta(victim)["written"] == "2"


def test_a_success_between_failures_starts_the_count_again(world: World) -> None:
    key = world.save_victim()
    world.redis.hset(keys.meta(key), "failures", UNKNOWN_FAILURES_ALLOWED - 1)
    world.flush_all()
    assert "failures" not in world.meta(key)


def _refusing_collection(world: World, name: str) -> None:
    """A collection made by another tool: one unnamed vector of the right size, but of many
    vectors per point, so Qdrant refuses memory-pool's points."""
    store = world.runtime.store
    if isinstance(store, EdgeStore):  # nobody else opens serve's folder: made beside the store
        config = edge.EdgeConfig(
            vectors=edge.EdgeVectorParams(
                size=EMBEDDING_DIMS,
                distance=edge.Distance.Cosine,
                multivector_config=edge.MultiVectorConfig(edge.MultiVectorComparator.MaxSim),
            )
        )
        edge.EdgeShard.create(str(store.root / name), config).close()
        (store.root / f"{name}.json").write_text(json.dumps({"dimensions": EMBEDDING_DIMS}))
        return
    assert isinstance(store, QdrantStore)
    client = store._client
    params = models.VectorParams(
        size=EMBEDDING_DIMS,
        distance=models.Distance.COSINE,
        multivector_config=models.MultiVectorConfig(
            comparator=models.MultiVectorComparator.MAX_SIM
        ),
    )
    client.create_collection(name, vectors_config=params)


def test_a_collection_that_refuses_writes_holds_back_no_other(world: World) -> None:
    _refusing_collection(world, "mem_refusing")
    refused = [
        world.legacy("refusing", "mem_refusing", f"r{n}", record(f"r{n}", BASE_TS + n))
        for n in range(2)
    ]
    victim = world.save_victim()
    _, report = world.flush_all()
    assert world.stored_ids("mem_victim") == [["v1-0", "v1-1"]]
    assert world.meta(victim)["written"] == "2"
    assert report.conversations == 1
    # Edge and local mode refuse with an unforeseen error (third strike), a server with a 400
    # (at once); either way the refused conversations end up quarantined, messages kept.
    for _ in range(UNKNOWN_FAILURES_ALLOWED):
        if len(world.quarantined()) == 2:
            break
        world.flush_all()
    assert sorted(world.quarantined()) == sorted(refused)
    assert [world.buffered(key) for key in refused] == [1, 1]

    # The fix: the foreign collection goes; released, the conversations are written once.
    store = world.runtime.store
    if isinstance(store, EdgeStore):
        store.drop_collection("mem_refusing")
    else:
        assert isinstance(store, QdrantStore)
        store._client.delete_collection("mem_refusing")
    world.deps.collections.forget("mem_refusing")
    assert world.quarantine.release(refused) == 2
    world.flush_all()
    assert world.stored_ids("mem_refusing") == [["r0"], ["r1"]]
    assert world.quarantined() == []
    assert world.stored_ids("mem_victim") == [["v1-0", "v1-1"]]


def test_a_release_without_a_fix_returns_to_quarantine_and_doubles_nothing(world: World) -> None:
    poisoner = world.legacy(
        "poisoner",
        "mem_poisoner",
        "p",
        record("p1", MICROSECONDS_TS),
        record("p2", MICROSECONDS_TS + 1),
    )
    world.flush_all()
    assert world.quarantine.release([poisoner]) == 1
    assert world.quarantined() == [] and world.redis.zscore(keys.DUE, poisoner) is not None
    world.flush_all()
    assert world.quarantined() == [poisoner]
    assert world.buffered(poisoner) == 2
    assert world.quarantine.release(["nobody:x:y"]) == 0


def test_an_embedding_batch_broken_by_one_conversation_writes_the_others(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An unforeseen exception from the shared embedding batch: each conversation is then
    # embedded alone, and only the one that breaks it is set aside.
    real = world.deps.embedder.embed

    def embed(texts: list[str]) -> Any:
        if any("POISON" in text for text in texts):
            raise RuntimeError("the provider's client broke on this text")
        return real(texts)

    monkeypatch.setattr(world.deps.embedder, "embed", embed)
    poisoner = world.legacy(
        "poisoner", "mem_poisoner", "p", record("p1", BASE_TS, text="POISON " + TEXT)
    )
    world.save_victim()
    _, report = world.flush_all()
    assert world.stored_ids("mem_victim") == [["v1-0", "v1-1"]]
    assert report.retried == 1
    assert world.meta(poisoner)["failures"] == "1"


def test_a_point_qdrant_refuses_holds_back_no_collection_mate(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Qdrant refusing one conversation's point (a 400, as a server answers bad input) fails
    # the whole upsert of its collection: each conversation is then written alone, so only
    # the refused one is set aside and its collection-mates are committed.
    real = world.runtime.store.upsert

    def upsert(collection: str, points: Any) -> None:
        if any("POISON" in point.payload["text"] for point in points):
            content = b'{"status":{"error":"Wrong input: payload refused"}}'
            raise UnexpectedResponse(400, "Bad Request", content, httpx.Headers())
        real(collection, points)

    monkeypatch.setattr(world.runtime.store, "upsert", upsert)
    bad = world.legacy("victim", "mem_victim", "bad", record("b1", BASE_TS, text="POISON " + TEXT))
    mate = world.save_victim("v1")
    _, report = world.flush_all()
    assert world.stored_ids("mem_victim") == [["v1-0", "v1-1"]]
    assert world.meta(mate)["written"] == "2"
    assert report.quarantined == 1 and world.quarantined() == [bad]
    assert world.meta(bad)["quarantined"].startswith("UnexpectedResponse: Unexpected Response: 400")


@pytest.mark.parametrize("status", [401, 403])
def test_qdrant_refusing_the_key_quarantines_nothing(
    world: World, monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    # Review: Qdrant answering 401/403 (a rotated or wrong QDRANT_API_KEY) is a setting, like
    # the embedding provider's 401/403, which is retried; it was "unforeseen", so every
    # conversation flushed in the next seconds was quarantined and needed a manual release.
    def upsert(collection: str, points: Any) -> None:
        content = b'{"status":{"error":"Must provide an API key"}}'
        raise UnexpectedResponse(status, "Unauthorized", content, httpx.Headers())

    monkeypatch.setattr(world.runtime.store, "upsert", upsert)
    victim = world.save_victim()
    for _ in range(UNKNOWN_FAILURES_ALLOWED + 1):
        _, report = world.flush_all()
        assert report.quarantined == 0 and report.retried == 1
    assert world.quarantined() == []
    assert world.buffered(victim) == 2
    assert "failures" not in world.meta(victim)


def test_the_task_running_out_of_time_is_no_ones_fault(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Review: Celery's soft time limit (a prefork `memory-pool worker`) raises
    # SoftTimeLimitExceeded, an Exception, in whatever step the flush is in. It was caught as
    # an unforeseen failure: the batch was embedded again conversation by conversation (more
    # work past the limit) and each conversation counted a failure toward the quarantine, so a
    # slow provider quarantined healthy conversations.
    calls = []

    def embed(texts: list[str]) -> Any:
        calls.append(len(texts))
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(world.deps.embedder, "embed", embed)
    victim = world.save_victim()
    other = world.save_victim("v2")
    for _ in range(UNKNOWN_FAILURES_ALLOWED):
        _, report = world.flush_all()
        assert report.quarantined == 0 and report.retried == 2
    assert calls == [2] * UNKNOWN_FAILURES_ALLOWED  # never one by one
    assert world.quarantined() == []
    for key in (victim, other):
        assert "failures" not in world.meta(key) and world.buffered(key) == 2


def test_a_due_entry_with_nothing_buffered_is_no_quarantine(world: World) -> None:
    # Review: a due entry whose conversation holds nothing (no meta, no buffer: left behind
    # by older code or an evicted key) failed the agent lookup on its empty name and was
    # quarantined with 0 messages, so /health said degraded for nothing, release after release.
    ghost = "mem_ghost:discord:chan%3Dq"
    world.redis.zadd(keys.DUE, {ghost: 0})
    world.save_victim()
    _, report = world.flush_all()
    assert report.quarantined == 0 and world.quarantined() == []
    assert world.redis.zscore(keys.DUE, ghost) is None
    assert world.stored_ids("mem_victim") == [["v1-0", "v1-1"]]


def test_a_delete_while_a_flush_fails_is_the_fix_not_a_quarantine(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Review: the operator deletes the bad message while a flush that read it is failing on
    # it; the failure still quarantined the conversation (the quarantine script checked the
    # lease, not the generation), so the fix was undone and a release was needed.
    poisoner = world.legacy(
        "poisoner", "mem_poisoner", "p", record("p1", BASE_TS), record("p2", BASE_TS + 1000)
    )

    def chunk_text(messages: Any) -> str:
        BufferDeletes(world.redis).forget([poisoner], BufferScope("ids", ("p1",)), 0)
        raise ValueError("p1 cannot be formatted")  # what the flush read still holds it

    monkeypatch.setattr(workers.flush, "chunk_text", chunk_text)
    _, report = world.flush_all()
    assert report.quarantined == 0 and world.quarantined() == []
    assert "failures" not in world.meta(poisoner)
    monkeypatch.undo()
    world.flush_all()
    assert world.stored_ids("mem_poisoner") == [["p2"]]


def test_a_flush_whose_lease_expired_quarantines_nothing_another_holds(world: World) -> None:
    # Review (held): worker A's lease expires while it fails on the conversation; worker B
    # has claimed it since. A's failure changes nothing: B's lease, the due entry and the
    # count stay as they are.
    key = world.legacy("poisoner", "mem_poisoner", "p", record("p1", MICROSECONDS_TS))
    [first] = world.claim_all()
    world.redis.delete(keys.lease(key))  # A's lease expired
    [second] = world.claim_all()
    assert second.token != first.token
    outcome = world.quarantine.fail(first, "ValueError: late", threshold=1, retry_in=1)
    assert outcome is FailOutcome.LEASE_LOST
    assert world.quarantined() == []
    assert world.redis.get(keys.lease(key)).decode() == second.token
    assert "failures" not in world.meta(key)

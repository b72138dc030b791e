"""End to end (API, a real Celery worker, the scheduler; local-mode Qdrant and the REST test
server): one bad conversation never holds back another, and the quarantine it lands in is
visible, keeps its messages and is released after a fix.

The poison is legacy buffered data, written into Redis as the code before the door stored it
(the door now refuses it at /save), made due in the same sweep as a victim's forced chunk, so
the scheduler hands both to one flush task.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

import workers.flush
from shared.agents import AgentConfig, Agents
from shared.state import keys
from shared.state.quarantine import Quarantine
from tests.support.embedding_server import EmbeddingServer
from tests.support.legacy import BASE_TS, LONG, MICROSECONDS_TS, buffer_legacy, record
from tests.support.qdrant_server import QdrantTestServer
from tests.support.stack import Stack, running_stack, stack_settings

HOUR_MS = 3_600_000
LONG_NAME = "b" * 1024


@pytest.fixture(params=["edge", "server"])
def stack(
    request: pytest.FixtureRequest, redis_url: str, embeddings: EmbeddingServer, tmp_path: Path
) -> Iterator[Stack]:
    agents = Agents([AgentConfig(name="victim", self_speaker="Victim")], accept_unlisted=True)
    with ExitStack() as stack:
        extra = {}
        if request.param == "server":
            qdrant = stack.enter_context(QdrantTestServer(tmp_path / "qdrant-server"))
            extra["QDRANT_URL"] = qdrant.url
        settings = stack_settings(redis_url, embeddings.url, tmp_path, **extra)
        yield stack.enter_context(running_stack(settings, agents))


def message(mid: str, n: int = 0) -> dict[str, Any]:
    return {"message_id": mid, "text": f"{LONG} ({mid})", "ts": BASE_TS + n * 1000}


def poison(stack: Stack, agent: str, collection: str, *records: dict) -> str:
    """A legacy conversation, quiet for an hour (its open chunk is due), not yet due."""
    r = stack.runtime.redis
    due_later = int(time.time() * 1000) + HOUR_MS
    key = buffer_legacy(
        r, agent=agent, collection=collection, channel="p", records=list(records), due_at=due_later
    )
    r.hset(keys.meta(key), "last", int(time.time() * 1000) - HOUR_MS)
    return key


def victim_and_poison_due_together(stack: Stack, *poisoned: str) -> str:
    """The victim's two messages through /save, its chunk forced, due in the same sweep."""
    stack.save({"bot": "victim", "messages": [message("v1"), message("v2", 1)]})
    [victim] = stack.runtime.buffers.conversations_of("mem_victim")
    r = stack.runtime.redis
    r.hset(keys.meta(victim), "force", 1)
    r.zadd(keys.DUE, dict.fromkeys([victim, *poisoned], 0))  # one command: one sweep
    return victim


def wait_for(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def stored(stack: Stack, collection: str) -> list[list[str]]:
    return sorted(p["messageIdList"] for p in stack.payloads(collection))


def quarantined(stack: Stack) -> list[str]:
    return [member for member, _ in Quarantine(stack.runtime.redis).members()]


def test_poisoned_conversations_are_quarantined_and_the_victim_written(stack: Stack) -> None:
    # Observed: with a `ts` in microseconds (year 56411) or a 1,024-character bot name, every
    # flush task failed and `victim`'s chunk stayed unwritten for minutes; /health said ok.
    year = poison(stack, "poisoner", "mem_poisoner", record("p1", MICROSECONDS_TS),
                  record("p2", MICROSECONDS_TS + 1000))  # fmt: skip
    named = poison(stack, LONG_NAME, "mem_" + "b" * 1020, record("b1", BASE_TS))
    victim_and_poison_due_together(stack, year, named)

    wait_for(lambda: stored(stack, "mem_victim") == [["v1", "v2"]], timeout=10)
    wait_for(lambda: len(quarantined(stack)) == 2)
    assert stack.flush("victim") == {
        "conversations": 1, "pending": 0, "quarantined": 0, "done": True
    }  # fmt: skip
    assert sorted(quarantined(stack)) == sorted([year, named])

    health = stack.client.get("/health").json()
    assert health["status"] == "degraded"
    assert health["redis"]["quarantined"] == 2
    assert health["agents"]["poisoner"]["quarantined"] == 1
    assert health["agents"]["victim"]["quarantined"] == 0

    [entry] = stack.client.get("/agents/poisoner/stats").json()["quarantined"]
    assert entry["conversation"] == year and entry["messages"] == 2
    assert entry["reason"] == "ValueError: year 56411 is out of range"
    listing = stack.client.get("/quarantine").json()
    assert listing["total"] == 2
    reasons = {e["agent"]: e["reason"] for e in listing["entries"]}
    assert reasons[LONG_NAME].startswith("InvalidAgentName: agent name")
    letters = stack.client.get("/dead-letters").json()
    assert letters["quarantined_total"] == 2 and letters["total"] == 0

    # A force flush answers at once with what is quarantined, instead of waiting on it.
    started = time.monotonic()
    answer = stack.client.post("/agents/poisoner/flush", params={"wait": "true"}).json()
    assert answer == {"conversations": 1, "pending": 0, "quarantined": 1, "done": False}
    assert time.monotonic() - started < 5


def test_a_quarantined_conversation_keeps_new_messages_and_is_cleared_by_deletes(
    stack: Stack,
) -> None:
    year = poison(stack, "poisoner", "mem_poisoner", record("p1", MICROSECONDS_TS),
                  record("p2", MICROSECONDS_TS + 1000))  # fmt: skip
    victim_and_poison_due_together(stack, year)
    wait_for(lambda: quarantined(stack) == [year])

    # Released with the bad messages still in it: tried again (forced), it returns; the
    # waiting caller is told so instead of waiting on it, and nothing is written.
    released = stack.client.post("/quarantine/release", json={"bot": "poisoner"}).json()
    assert released == {"released": 1}
    answer = stack.client.post("/agents/poisoner/flush", params={"wait": "true"}).json()
    assert answer == {"conversations": 1, "pending": 0, "quarantined": 1, "done": False}
    assert quarantined(stack) == [year]
    assert stored(stack, "mem_poisoner") == []

    # New messages still join it, deduplicated; they wait with it, never claimed meanwhile.
    new = {**message("p3", 3), "channel_id": "p"}
    body = {"bot": "poisoner", "source": "discord", "messages": [new]}
    assert stack.save(body)["accepted"] == 1
    assert stack.save(body)["duplicates"] == 1
    time.sleep(0.5)  # several sweeps
    assert quarantined(stack) == [year]
    assert stack.runtime.redis.llen(keys.buffer(year)) == 3
    assert stack.runtime.redis.zscore(keys.DUE, year) is None

    # Deleting all its messages clears it.
    scope = {"source": "discord", "channel_id": "p"}
    response = stack.client.post("/agents/poisoner/delete", json=scope)
    assert response.json()["deleted_buffered"] == 3, response.text
    assert quarantined(stack) == []
    assert stack.client.get("/health").json()["status"] == "ok"
    assert stack.save(body)["duplicates"] == 1  # deleted for good
    assert stored(stack, "mem_poisoner") == []


def test_an_unforeseen_exception_is_isolated_then_released_after_a_fix(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An exception nobody foresaw, raised for one conversation's chunk (the worker runs in
    # this process, as threads): logged, retried with backoff, quarantined at the third.
    real = workers.flush.chunk_text

    def chunk_text(messages: Any) -> str:
        if any("POISON" in m.text for m in messages):
            raise RuntimeError("formatting broke on this chunk")
        return real(messages)

    monkeypatch.setattr(workers.flush, "chunk_text", chunk_text)
    bad = poison(stack, "poisoner", "mem_poisoner", record("p1", BASE_TS, text="POISON " + LONG))
    victim_and_poison_due_together(stack, bad)
    wait_for(lambda: stored(stack, "mem_victim") == [["v1", "v2"]], timeout=5)
    assert quarantined(stack) == []  # not yet: it is retried first
    wait_for(lambda: quarantined(stack) == [bad], timeout=30)
    meta = stack.runtime.redis.hgetall(keys.meta(bad))
    assert meta[b"failures"] == b"3"
    assert meta[b"quarantined"] == b"RuntimeError: formatting broke on this chunk"

    monkeypatch.undo()  # the fix
    answer = stack.client.post("/quarantine/release", json={"conversation": bad}).json()
    assert answer == {"released": 1}
    wait_for(lambda: stored(stack, "mem_poisoner") == [["p1"]])
    assert quarantined(stack) == []
    assert stack.client.get("/agents/poisoner/stats").json()["quarantined"] == []


def test_deleting_the_broken_record_of_a_quarantined_conversation_is_the_fix(
    stack: Stack,
) -> None:
    # Review: a buffered record without its time (older code) quarantines its conversation;
    # deleting it (the documented fix) answered 500 from Message.from_json after Redis had
    # already removed it, so no tombstone was written and Qdrant was never asked.
    broken = {"i": "k1", "t": LONG, "s": "Alex", "z": 80}
    bad = poison(stack, "broken", "mem_broken", broken, record("k2", BASE_TS))
    victim_and_poison_due_together(stack, bad)
    wait_for(lambda: quarantined(stack) == [bad], timeout=30)

    response = stack.client.post("/agents/broken/delete", json={"message_id": "k1"})
    assert response.status_code == 200, response.text
    assert response.json()["deleted_buffered"] == 1
    seen = stack.runtime.redis.get(keys.seen("mem_broken", "discord", "k1"))
    assert seen == b"deleted"  # tombstoned: a re-send never stores it
    wait_for(lambda: stored(stack, "mem_broken") == [["k2"]])
    assert quarantined(stack) == []


def test_a_record_that_is_not_json_does_not_break_deletes(stack: Stack) -> None:
    # Review: a record that is not a JSON object made the delete script itself fail (cjson),
    # so no delete could touch its conversation; a delete of the whole conversation clears it.
    bad = poison(stack, "broken", "mem_broken", record("k2", BASE_TS))
    stack.runtime.redis.rpush(keys.buffer(bad), "{not json", "7")
    other = stack.client.post("/agents/broken/delete", json={"message_id": "k2"})
    assert other.status_code == 200, other.text
    assert other.json()["deleted_buffered"] == 1
    assert stack.runtime.redis.llen(keys.buffer(bad)) == 2
    scope = {"source": "discord", "channel_id": "p"}
    response = stack.client.post("/agents/broken/delete", json=scope)
    assert response.status_code == 200, response.text
    assert response.json()["deleted_buffered"] == 2
    assert stack.runtime.redis.llen(keys.buffer(bad)) == 0


def test_a_quarantine_no_fix_can_clear_is_discarded_by_an_operator(stack: Stack) -> None:
    # Review: a legacy agent name no collection can have is quarantined, but every endpoint
    # that could delete its messages refuses the name (400), so no release ever writes it and
    # /health stayed degraded for good. An operator discards such a conversation.
    named = poison(stack, LONG_NAME, "mem_" + "b" * 1020, record("b1", BASE_TS))
    year = poison(stack, "poisoner", "mem_poisoner", record("p1", MICROSECONDS_TS))
    victim_and_poison_due_together(stack, named, year)
    wait_for(lambda: sorted(quarantined(stack)) == sorted([named, year]))
    assert stack.client.post(f"/agents/{LONG_NAME}/delete", json={}).status_code == 400

    discard = "/quarantine/discard"
    missing = stack.client.post(discard, json={"conversation": "mem_victim:discord:chan%3Dx"})
    assert missing.status_code == 404 and set(missing.json()) == {"error", "detail"}
    assert stack.client.post(discard, json={}).status_code == 422
    answer = stack.client.post(discard, json={"conversation": named})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"discarded": 1}
    assert quarantined(stack) == [year]  # only the one chosen
    r = stack.runtime.redis
    assert r.llen(keys.buffer(named)) == 0 and r.zscore(keys.DUE, named) is None
    assert r.get(keys.seen("mem_" + "b" * 1020, "discord", "b1")) == b"deleted"
    assert stack.client.post(discard, json={"conversation": year}).json() == {"discarded": 1}
    assert stack.client.get("/health").json()["status"] == "ok"
    assert stored(stack, "mem_poisoner") == []

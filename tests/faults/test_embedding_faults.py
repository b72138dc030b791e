"""The embedding provider rate limits, fails, hangs and refuses one input: nothing lost."""

from __future__ import annotations

from tests.support.cluster import (
    Cluster,
    Conversations,
    assert_exactly_once,
    exactly_once_problems,
    wait_until,
)

POISON = "POISON-PILL"


def _answered(cluster: Cluster, status: int) -> bool:
    return any(record.status == status for record in cluster.embeddings.requests)


def _worker_logged(cluster: Cluster, text: str) -> bool:
    return any(text in worker.log_since_mark() for worker in cluster.workers)


def _text(n: int, channel: str) -> str | None:
    if channel == "c1" and n == 5:
        return f"message number {n} in {channel}: {POISON} the provider refuses this one"
    return None


def test_provider_outages_are_retried_and_a_refused_chunk_is_replayed(cluster: Cluster) -> None:
    server = cluster.embeddings
    server.reject_inputs_containing(POISON)
    chat = Conversations("flaky", channels=4)
    # One fault at a time, each only once a request has met the one before.
    server.fail_next(429, retry_after=1)
    for _ in range(8):
        chat.turn(cluster.api, _text)
    wait_until(lambda: _answered(cluster, 429), 10, "a 429")
    server.fail_next(500)
    for _ in range(8):
        chat.turn(cluster.api, _text)
    wait_until(lambda: _answered(cluster, 500), 10, "a 500")
    server.hang_next(2.5)  # past MEMORY_POOL_EMBEDDING_TIMEOUT=1: the worker gives up first
    for _ in range(8):
        chat.turn(cluster.api, _text)
    wait_until(lambda: _worker_logged(cluster, "timed out"), 10, "an embedding timeout")
    cluster.flush("flaky", timeout=30)

    letters = cluster.api.get("/dead-letters").json()
    refused = [e for e in letters["entries"] if e["agent"] == "flaky"]
    assert len(refused) == 1, letters
    assert "c1-0005" in refused[0]["message_ids"] and POISON in refused[0]["text"]
    assert exactly_once_problems(cluster.stored_ids("flaky"), chat.sent) == {
        "missing": sorted(refused[0]["message_ids"])
    }

    server.clear_faults()
    reply = cluster.api.post("/dead-letters/replay", json={"bot": "flaky"})
    assert reply.status_code == 202 and reply.json() == {"queued": 1, "released": 0}
    wait_until(
        lambda: not exactly_once_problems(cluster.stored_ids("flaky"), chat.sent), 15, "replay"
    )
    assert_exactly_once(cluster.stored_ids("flaky"), chat.sent)
    assert cluster.api.get("/dead-letters").json()["total"] == 0
    statuses = {record.status for record in server.requests}
    assert {200, 400, 429, 500} <= statuses, statuses

"""Dead letters end to end: a refused chunk is listed, the rest goes on, a replay stores it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.agents import AgentConfig, Agents
from shared.embedding.bm25 import document_terms
from shared.store import bm25_terms as bm25_store
from tests.support.embedding_server import EmbeddingServer
from tests.support.stack import Stack, running_stack, stack_settings

BASE_TS = 1_718_000_000_000


@pytest.fixture
def stack(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[Stack]:
    agents = Agents([AgentConfig(name="mythos", self_speaker="Mythos")], accept_unlisted=False)
    with running_stack(stack_settings(redis_url, embeddings.url, tmp_path), agents) as running:
        yield running


def message(n: int, text: str, channel: str) -> dict:
    return {"message_id": f"{channel}-{n}", "text": text, "ts": BASE_TS + n * 1000,
            "discord_user_id": "1", "speaker_name": "Alex", "channel_id": channel}  # fmt: skip


def stored_ids(stack: Stack) -> list[str]:
    return sorted(i for p in stack.payloads("mem_mythos") for i in p["messageIdList"])


def test_refused_chunk_is_dead_lettered_and_replayed(
    stack: Stack, embeddings: EmbeddingServer
) -> None:
    embeddings.reject_inputs_containing("POISON")
    stack.save({"bot": "mythos", "messages": [
        message(1, "a perfectly ordinary message about the weather today", "good"),
        message(2, "and another ordinary message about the rain", "good"),
    ]})  # fmt: skip
    stack.save({"bot": "mythos", "messages": [
        message(1, "this one carries the POISON word for the provider", "bad"),
        message(2, "and its neighbour in the same chunk", "bad"),
    ]})  # fmt: skip
    stack.flush("mythos")
    assert stored_ids(stack) == ["good-1", "good-2"]

    listing = stack.client.get("/dead-letters").json()
    assert listing["total"] == 1
    (entry,) = listing["entries"]
    assert entry["agent"] == "mythos" and entry["message_ids"] == ["bad-1", "bad-2"]
    assert "POISON" in entry["reason"]
    assert entry["text"].startswith("[2024-06-10]\nAlex: this one carries the POISON word")

    # Re-sent, the refused messages are duplicates: they are not queued a second time.
    sent = "this one carries the POISON word for the provider"
    again = stack.save({"bot": "mythos", "messages": [message(1, sent, "bad")]})
    assert again["duplicates"] == 1

    embeddings.clear_faults()
    response = stack.client.post("/dead-letters/replay", json={"bot": "mythos"})
    assert response.status_code == 202 and response.json() == {"queued": 1, "released": 0}
    deadline = time.monotonic() + 15
    while stored_ids(stack) != ["bad-1", "bad-2", "good-1", "good-2"]:
        assert time.monotonic() < deadline, stored_ids(stack)
        time.sleep(0.05)
    assert stack.client.get("/dead-letters").json() == {
        "total": 0, "entries": [], "quarantined_total": 0, "quarantined": []
    }  # fmt: skip
    bad = next(p for p in stack.payloads("mem_mythos") if "bad-1" in p["messageIdList"])
    assert bad["text"] == entry["text"] and bad["source"] == "discord"


def test_a_replayed_chunk_carries_its_bm25_terms_in_the_same_upsert(
    redis_url: str, embeddings: EmbeddingServer, tmp_path: Path
) -> None:
    """The replay wrote the dense vector alone: the chunk was invisible to hybrid recall's
    lexical leg until a backfill found it (or, when it replaced an existing point, the point
    count did not change and the backfill skipped the collection for up to 10 minutes)."""
    agents = Agents([AgentConfig(name="mythos", self_speaker="Mythos", language="german")],
                    accept_unlisted=False)  # fmt: skip
    # no backfill during the test: only the replay itself can give the chunk its terms
    settings = stack_settings(
        redis_url, embeddings.url, tmp_path, MEMORY_POOL_BACKFILL_INTERVAL=3600
    )
    with running_stack(settings, agents) as stack:
        embeddings.reject_inputs_containing("POISON")
        stack.save({"bot": "mythos", "messages": [
            message(1, "this one carries the POISON word and Zephyrine", "bad"),
            message(2, "and its neighbour in the same chunk", "bad"),
        ]})  # fmt: skip
        stack.flush("mythos")
        assert stack.client.get("/dead-letters").json()["total"] == 1
        embeddings.clear_faults()
        response = stack.client.post("/dead-letters/replay", json={"bot": "mythos"})
        assert response.status_code == 202
        deadline = time.monotonic() + 15
        while stored_ids(stack) != ["bad-1", "bad-2"]:
            assert time.monotonic() < deadline, stored_ids(stack)
            time.sleep(0.05)
        (point,) = stack.runtime.store.iter_points("mem_mythos")
        assert point.sparse is not None, "the replayed chunk has no BM25 terms"
        # made as a flush makes them: the agent's language, from the chunk's text
        expected = document_terms(point.payload["text"], "german")
        assert sorted(point.sparse[0]) == sorted(expected.indices)
        assert bm25_store.lacking_terms(stack.runtime.store, "mem_mythos") == 0


def test_replay_of_unknown_agent_is_404(stack: Stack) -> None:
    response = stack.client.post("/dead-letters/replay", json={"bot": "nobody"})
    assert response.status_code == 404
    assert response.json()["error"] == "unknown_agent"

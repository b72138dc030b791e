"""client/http_client.py against a running memory-pool over real HTTP."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from client.http_client import MemoryPoolClient, MemoryPoolError
from shared.format.fingerprint import text_fingerprint
from tests.support.embedding_server import EmbeddingServer
from tests.support.live_server import Live, fresh_live_memory_pool
from tests.support.redis_server import RedisServer

AGENT = "clerk"
HEADER = "\n[Past chat memories]\n\n"
AGENTS_FILE = {"agents": [{"name": AGENT, "self_speaker": "Clerk"}]}


def message(mid: str, text: str, ts: int, *, self_: bool = False) -> dict[str, object]:
    return {
        "message_id": mid, "text": text, "ts": ts, "conversation_id": "conv-1",
        "speaker_kind": "self" if self_ else "user", **({} if self_ else {"user_id": "u1"}),
    }  # fmt: skip


MESSAGES = [
    message("m1", "the lighthouse keeper sang to the whales at dawn", 1_718_000_000_000),
    message("m2", "and the whales answered the lighthouse keeper", 1_718_000_001_000, self_=True),
]


@pytest.fixture(scope="module")
def live(
    redis_server: RedisServer,
    embedding_server: EmbeddingServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Live]:
    data_dir = tmp_path_factory.mktemp("http-client")
    with fresh_live_memory_pool(redis_server, embedding_server, data_dir, AGENTS_FILE) as up:
        yield up


@pytest.fixture
def client(live: Live) -> Iterator[MemoryPoolClient]:
    with MemoryPoolClient(live.url, timeout=10) as memory_pool:
        yield memory_pool


def test_health_reports_every_service(client: MemoryPoolClient) -> None:
    report = client.health()
    assert report["status"] == "ok", report
    assert AGENT in report["agents"]


def test_save_flush_retrieve_known_ids_stats_delete(client: MemoryPoolClient) -> None:
    assert client.save(AGENT, MESSAGES, source="test") == {
        "accepted": 2, "duplicates": 0, "skipped": 0,
    }  # fmt: skip
    assert client.save(AGENT, MESSAGES, source="test")["duplicates"] == 2
    assert client.flush(AGENT)["done"]

    found = client.retrieve(AGENT, "do you remember the lighthouse keeper and the whales?")
    assert [hit["payload"]["messageIds"] for hit in found["hits"]] == ["m1,m2"]
    assert found["formatted"].startswith(HEADER)
    assert "Clerk: and the whales answered" in found["formatted"]
    excluded = client.retrieve(AGENT, "the lighthouse keeper", exclude_message_ids=["m2"])
    assert excluded == {"hits": [], "formatted": ""}

    assert client.known_ids(AGENT, ["m1", "m2", "never-sent"]) == ["m1", "m2"]
    stats = client.stats(AGENT)
    assert stats["points_by_source"] == {"test": 1}
    assert stats["buffered_messages"] == 2  # flushed, and still open: it may grow

    deleted = client.delete(AGENT, source="test", conversation_id="conv-1")
    assert deleted["deleted_points"] == 1
    assert client.retrieve(AGENT, "the lighthouse keeper")["hits"] == []
    assert client.save(AGENT, MESSAGES[:1], source="test")["accepted"] == 0  # deleted for good


def test_known_fingerprints_and_an_edit_by_source(client: MemoryPoolClient, live: Live) -> None:
    first = "the harbour bell rang twice before the fog came in"
    edited = "the harbour bell rang three times before the fog came in"
    stored = [
        message("f1", first, 1_718_000_100_000),
        message("f2", "and then once more", 1_718_000_101_000),
    ]
    assert client.save(AGENT, stored, source="fp")["accepted"] == 2
    assert client.flush(AGENT)["done"]

    # without a source the answer is what it always was
    raw = httpx.post(f"{live.url}/agents/{AGENT}/known-ids", json={"message_ids": ["f1", "x"]})
    assert raw.json() == {"known": ["f1"]}
    assert client.known_fingerprints(AGENT, ["f1", "never-sent"], source="fp") == {
        "f1": text_fingerprint(first)
    }
    assert client.known_fingerprints(AGENT, ["f1"], source="other") == {"f1": None}

    assert client.edit(AGENT, "f1", f"  {edited} ", source="fp") == {
        "message_id": "f1", "source": "fp", "outcome": "edited",
    }  # fmt: skip
    assert client.edit(AGENT, "f1", edited, source="fp")["outcome"] == "unchanged"
    with pytest.raises(MemoryPoolError) as unknown:
        client.edit(AGENT, "never-sent", edited, source="fp")
    assert (unknown.value.status, unknown.value.error) == (404, "message_not_found")


def test_dead_letters_lists_and_replays(client: MemoryPoolClient) -> None:
    listed = client.dead_letters(limit=10)
    assert isinstance(listed, dict)
    assert isinstance(client.replay_dead_letters(AGENT), dict)


def test_quarantine_lists_and_releases(client: MemoryPoolClient) -> None:
    assert client.quarantine() == {"total": 0, "entries": []}
    assert client.quarantine(AGENT, limit=5) == {"total": 0, "entries": []}
    assert client.release_quarantine(AGENT) == {"released": 0}
    assert client.release_quarantine(conversation="mem_clerk:test:default") == {"released": 0}
    with pytest.raises(MemoryPoolError) as unknown:
        client.quarantine("nobody-here")
    assert (unknown.value.status, unknown.value.error) == (404, "unknown_agent")


def test_refusals_raise_memory_pool_error_with_status_code_and_detail(
    client: MemoryPoolClient,
) -> None:
    with pytest.raises(MemoryPoolError) as unknown:
        client.retrieve("nobody-here", "hello")
    assert (unknown.value.status, unknown.value.error) == (404, "unknown_agent")
    assert "nobody-here" in unknown.value.detail

    with pytest.raises(MemoryPoolError) as invalid:
        client.save(AGENT, [{"text": "no id at all"}])
    assert (invalid.value.status, invalid.value.error) == (422, "invalid_request")
    assert "message_id" in invalid.value.detail
    assert str(invalid.value).startswith("422 invalid_request: ")


def test_browse_read_preview_and_delete_one_memory(client: MemoryPoolClient) -> None:
    start = 1_719_000_000_000
    texts = [(f"v{i}", f"viewer message {i} about the harbour") for i in range(3)]
    batch = [message(mid, text, start + i * 7 * 3600_000) for i, (mid, text) in enumerate(texts)]
    for one in batch:
        assert client.save(AGENT, [one], source="viewer")["accepted"] == 1
    assert client.flush(AGENT)["done"]
    assert [a["name"] for a in client.agents()] == [AGENT]
    page = client.memories(AGENT, limit=2, source="viewer")
    assert [m["message_ids"] for m in page["memories"]] == [["v2"], ["v1"]]
    rest = client.memories(AGENT, limit=2, source="viewer", cursor=page["next_cursor"])
    assert [m["message_ids"] for m in rest["memories"]] == [["v0"]] and rest["next_cursor"] is None
    every = list(client.all_memories(AGENT, page_size=1, source="viewer"))
    assert [m["id"] for m in every] == [m["id"] for m in page["memories"] + rest["memories"]]
    newest = every[0]
    assert client.memory(AGENT, newest["id"]) == newest
    assert client.delete_memory(AGENT, newest["id"], dry_run=True)["points"] == 1
    assert client.delete_preview(AGENT, source="viewer")["points"] == 3
    assert client.delete_memory(AGENT, newest["id"])["deleted_points"] == 1
    with pytest.raises(MemoryPoolError) as gone:
        client.memory(AGENT, newest["id"])
    assert gone.value.status == 404 and gone.value.error == "point_not_found"
    assert len(client.timeline(AGENT, days=7)) == 7
    client.delete(AGENT, source="viewer")


def wait_for_text(client: MemoryPoolClient, point_id: str, words: str) -> dict[str, object]:
    deadline = time.monotonic() + 20
    while words not in (chunk := client.memory(AGENT, point_id))["text"]:
        assert time.monotonic() < deadline, f"{words!r} never reached point {point_id}"
        time.sleep(0.05)
    return chunk


def test_edit_rewrites_a_written_message_and_refuses_unknown_and_deleted_ids(
    client: MemoryPoolClient,
) -> None:
    # two ~300-character messages close a chunk (500): it is written, and only a worker
    # rewrites it
    harbour = "the harbour master counted the fishing boats at dusk, " * 6
    answer = "and the lighthouse answered each boat with three long flashes, " * 5
    start = 1_720_000_000_000
    pair = [message("e1", harbour, start), message("e2", answer, start + 1000, self_=True)]
    for one in pair:
        one["conversation_id"] = "conv-edit"
    assert client.save(AGENT, pair, source="edits")["accepted"] == 2
    assert client.flush(AGENT)["done"]
    [chunk] = client.memories(AGENT, source="edits")["memories"]
    assert chunk["message_ids"] == ["e1", "e2"]

    corrected = "the harbour master painted the fishing boats blue at dawn"
    assert client.edit(AGENT, "e1", corrected, source="edits") == {
        "message_id": "e1", "source": "edits", "outcome": "edited",
    }  # fmt: skip
    after = wait_for_text(client, chunk["id"], corrected)
    assert "counted the fishing boats" not in after["text"]
    assert after["message_ids"] == ["e1", "e2"] and "three long flashes" in after["text"]
    again = client.edit(AGENT, "e1", f"  {corrected} ", source="edits")
    assert again["outcome"] == "unchanged"

    with pytest.raises(MemoryPoolError) as unknown:
        client.edit(AGENT, "never-sent", corrected, source="edits")
    assert (unknown.value.status, unknown.value.error) == (404, "message_not_found")
    with pytest.raises(MemoryPoolError) as other_source:
        client.edit(AGENT, "e1", corrected)  # the default source: ids are per source
    assert (other_source.value.status, other_source.value.error) == (404, "message_not_found")
    with pytest.raises(MemoryPoolError) as too_long:
        client.edit(AGENT, "e1", "x" * 1_000_001, source="edits")
    assert too_long.value.status == 413

    removed = client.delete(AGENT, message_id="e2")  # its chunk keeps e1
    assert (removed["deleted_points"], removed["rewritten_points"]) == (0, 1)
    with pytest.raises(MemoryPoolError) as deleted:
        client.edit(AGENT, "e2", corrected, source="edits")
    assert (deleted.value.status, deleted.value.error) == (410, "message_deleted")
    assert "'e2'" in deleted.value.detail

"""The memory viewer's API end to end, on both Qdrant paths: browse, read, preview, delete one
chunk for good, chunks per day, and which agents a key may see and touch."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from shared.agents import AgentConfig, Agents, ApiKey
from tests.support.delete_data import msg, st_point, stored
from tests.support.embedding_server import EmbeddingServer
from tests.support.qdrant_server import QdrantTestServer
from tests.support.stack import Stack, running_stack, stack_settings

OPS = "ops-key-0123456789abcdef"
MYTHOS_KEY = "mythos-key-0123456789abc"
HOUR = 3600_000


@pytest.fixture(params=["edge", "server"])
def stack(
    request: pytest.FixtureRequest, redis_url: str, embeddings: EmbeddingServer, tmp_path: Path
) -> Iterator[Stack]:
    agents = Agents(
        [
            AgentConfig(name="mythos", self_speaker="Mythos", require_key=True),
            AgentConfig(name="other", require_key=True),
        ],
        accept_unlisted=False,
        api_keys=[
            ApiKey(name="ops", key=OPS),
            ApiKey(name="m", key=MYTHOS_KEY, agents=("mythos",)),
        ],
    )
    with ExitStack() as stack:
        extra = {}
        if request.param == "server":
            qdrant = stack.enter_context(QdrantTestServer(tmp_path / "qdrant-server"))
            extra["QDRANT_URL"] = qdrant.url
        settings = stack_settings(redis_url, embeddings.url, tmp_path, **extra)
        running = stack.enter_context(running_stack(settings, agents))
        running.client.headers["Authorization"] = f"Bearer {OPS}"
        yield running


def seed(stack: Stack) -> None:
    """Chunks in channels c1, c2 and c3 (each message its own chunk: 7 hours apart), a hermes
    chunk, and one st-qdrant-memory point."""
    for n, (mid, user, channel) in enumerate(
        [("a1", "1", "c1"), ("a2", "2", "c1"), ("b1", "1", "c2"), ("b2", "3", "c3")]
    ):
        stack.save({"bot": "mythos", "messages": [msg(mid, user, channel=channel, n=n * HOUR * 7)]})
    hermes = msg("h1", "1", channel="", n=40 * HOUR, conversation_id="s1")
    stack.save({"bot": "mythos", "source": "hermes", "messages": [hermes]})
    stack.save({"bot": "other", "messages": [msg("o1", "1")]})
    stack.flush("mythos")
    stack.flush("other")
    st = st_point("[2024-06-10]\nAlex: <b>hi</b>", "x9,a1")
    st.payload["timestamp"] -= 1  # the oldest: a tie with a1 would be ordered by random id
    stack.runtime.store.upsert("mem_mythos", [st])


def browse(stack: Stack, bot: str = "mythos", **query: Any) -> dict[str, Any]:
    response = stack.client.get(f"/agents/{bot}/memories", params=query)
    assert response.status_code == 200, response.text
    return response.json()


def pages(stack: Stack, **query: Any) -> list[list[list[str]]]:
    found, cursor = [], None
    while True:
        page = browse(stack, **query, **({"cursor": cursor} if cursor else {}))
        found.append([m["message_ids"] for m in page["memories"]])
        cursor = page["next_cursor"]
        if cursor is None:
            return found


def test_browse_pages_newest_first_and_filters(stack: Stack) -> None:
    seed(stack)
    assert pages(stack, limit=2) == [[["h1"], ["b2"]], [["b1"], ["a2"]], [["a1"], ["x9", "a1"]]]
    assert pages(stack, source="discord", channel_id="c1") == [[["a2"], ["a1"]]]
    assert pages(stack, user_id="1", limit=1) == [[["h1"]], [["b1"]], [["a1"]]]
    assert pages(stack, source="hermes", conversation_id="s1") == [[["h1"]]]
    first = 1_718_000_000_000 + 7 * 3600_000
    assert pages(stack, since=first, until=first + 7 * 3600_000) == [[["b1"], ["a2"]]]
    page = browse(stack, limit=10)["memories"]
    st = page[-1]
    assert st["writer"] == "sillytavern (extension)" and st["source"] is None
    assert st["text"] == "[2024-06-10]\nAlex: <b>hi</b>" and st["speakers"] == ["Alex", "Mythos"]
    hermes = page[0]
    assert hermes["writer"] == "hermes" and hermes["conversation_id"] == "s1"
    assert hermes["date"] == "2024-06-11" and hermes["user_ids"] == ["1"]
    assert hermes["messages"] == [{
        "id": "h1", "speaker": "user1", "ts": 1_718_000_000_000 + 40 * HOUR,
        "text": "message h1 says something worth remembering", "user_id": "1", "is_self": False,
    }]  # fmt: skip
    assert st["messages"] is None  # st-qdrant-memory keeps no messages: not editable
    assert browse(stack, "other")["memories"][0]["message_ids"] == ["o1"]  # within the agent


def test_read_one_memory_and_its_errors(stack: Stack) -> None:
    seed(stack)
    chunk = browse(stack, limit=1)["memories"][0]
    response = stack.client.get(f"/agents/mythos/memories/{chunk['id']}")
    assert response.status_code == 200 and response.json() == chunk
    other = browse(stack, "other")["memories"][0]["id"]
    missing = stack.client.get(f"/agents/mythos/memories/{other}")  # another agent's point
    assert missing.status_code == 404 and missing.json()["error"] == "point_not_found"
    bad = stack.client.get("/agents/mythos/memories/not-a-point")
    assert bad.status_code == 422
    cursor = stack.client.get("/agents/mythos/memories", params={"cursor": "x_y"})
    assert cursor.status_code == 400 and cursor.json()["error"] == "invalid_input"


def test_deleting_one_chunk_previews_then_tombstones_every_message(stack: Stack) -> None:
    seed(stack)
    pair = [msg("c1", "1", channel="c9", n=90 * HOUR), msg("c2", "2", channel="c9", n=90 * HOUR)]
    stack.save({"bot": "mythos", "messages": pair})
    stack.flush("mythos")  # an open chunk: written, and its messages still buffered
    chunk = browse(stack, channel_id="c9")["memories"][0]
    assert chunk["message_ids"] == ["c1", "c2"]
    path = f"/agents/mythos/memories/{chunk['id']}"
    preview = stack.client.delete(path, params={"dry_run": "true"})
    assert preview.json() == {"points": 1, "message_ids": 2, "points_without_source": 0,
                              "points_rewritten": 0}  # fmt: skip
    assert browse(stack, channel_id="c9")["memories"]  # a preview changes nothing
    done = stack.client.delete(path)
    assert done.json() == {"deleted_points": 1, "rewritten_points": 0, "deleted_buffered": 2,
                           "deleted_dead_letters": 0}  # fmt: skip
    assert browse(stack, channel_id="c9")["memories"] == []
    again = stack.save({"bot": "mythos", "messages": [msg("c1", "1", channel="c9"),
                                                      msg("c2", "2", channel="c9")]})  # fmt: skip
    assert again["accepted"] == 0 and again["duplicates"] == 2
    stack.flush("mythos")
    assert "c1" not in stored(stack) and "c2" not in stored(stack)
    assert stack.client.delete(path).status_code == 404  # gone


def test_delete_preview_counts_what_the_delete_removes(stack: Stack) -> None:
    seed(stack)
    body = {"message_id": "a1"}
    preview = stack.client.post("/agents/mythos/delete/preview", json=body).json()
    assert preview == {
        "points": 2,
        "message_ids": 2,
        "points_without_source": 1,
        "points_rewritten": 0,
    }  # a1 (alone in its chunk), x9
    assert stack.client.post("/agents/mythos/delete/preview", json={}).status_code == 422
    result = stack.client.post("/agents/mythos/delete", json=body).json()
    assert result["deleted_points"] == preview["points"]


def test_chunks_per_day_by_source(stack: Stack) -> None:
    now = int(time.time() * 1000)
    stack.save({"bot": "mythos", "messages": [msg("t1", "1", n=now - 1_718_000_000_000)]})
    today = msg("t2", "1", n=now - 1_718_000_000_000)
    stack.save({"bot": "mythos", "source": "hermes", "messages": [today]})
    stack.flush("mythos")
    point = st_point("[today]\nAlex: hi", "s1")
    point.payload["timestamp"] = now
    stack.runtime.store.upsert("mem_mythos", [point])
    days = stack.client.get("/agents/mythos/timeline").json()["days"]
    assert len(days) == 30
    assert days[-1]["by_source"] == {"discord": 1, "hermes": 1}
    assert days[-1]["without_source"] == 1
    assert all(not d["by_source"] and not d["without_source"] for d in days[:-1])


def test_a_scoped_key_sees_and_touches_only_its_agents(stack: Stack) -> None:
    seed(stack)
    client = stack.client
    listed = client.get("/agents").json()
    assert [a["name"] for a in listed["agents"]] == ["mythos", "other"]
    scoped = {"Authorization": f"Bearer {MYTHOS_KEY}"}
    assert client.get("/agents", headers=scoped).json()["agents"] == [
        {"name": "mythos", "collection": "mem_mythos", "listed": True, "blocked": None}
    ]
    nobody = client.get("/agents", headers={"Authorization": ""})
    assert nobody.status_code == 200 and nobody.json() == {"agents": [], "keys_configured": True}
    wrong = client.get("/agents", headers={"Authorization": "Bearer not-a-key-at-all-000"})
    assert wrong.status_code == 401
    other_point = browse(stack, "other")["memories"][0]["id"]
    # crafted requests: every spelling of the other agent, every endpoint of the viewer
    for name in ("other", "OTHER", "other.", "Other!"):
        for method, path, body in (
            ("GET", f"/agents/{name}/memories", None),
            ("GET", f"/agents/{name}/memories/{other_point}", None),
            ("DELETE", f"/agents/{name}/memories/{other_point}", None),
            ("POST", f"/agents/{name}/delete/preview", {"source": "discord"}),
            ("GET", f"/agents/{name}/timeline", None),
        ):
            answer = client.request(method, path, json=body, headers=scoped)
            assert answer.status_code == 403, (method, path, answer.text)
    # its own point named through its own agent is found; the other's point is not its own
    mine = client.get(f"/agents/mythos/memories/{other_point}", headers=scoped)
    assert mine.status_code == 404
    assert stored(stack, "mem_other") == ["o1"]
    assert client.get("/agents/mythos/memories", headers={"Authorization": ""}).status_code == 401


def test_a_random_point_id_is_not_found(stack: Stack) -> None:
    seed(stack)
    response = stack.client.delete(f"/agents/mythos/memories/{uuid.uuid4()}")
    assert response.status_code == 404

"""Deletes end to end: every scope, st-qdrant-memory's points, buffers, and no coming back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.agents import AgentConfig, Agents
from tests.support.delete_data import msg, st_point, stored
from tests.support.embedding_server import EmbeddingServer
from tests.support.stack import Stack, running_stack, stack_settings

BASE_TS = 1_718_000_000_000


@pytest.fixture
def stack(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[Stack]:
    agents = Agents(
        [AgentConfig(name="mythos", self_speaker="Mythos"), AgentConfig(name="other")],
        accept_unlisted=False,
    )
    with running_stack(stack_settings(redis_url, embeddings.url, tmp_path), agents) as running:
        yield running


def delete(stack: Stack, body: dict[str, Any], bot: str = "mythos") -> dict[str, Any]:
    response = stack.client.post(f"/agents/{bot}/delete", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def seed(stack: Stack) -> None:
    """Two chunks in c1 (users 1 and 2), one in c2, one from hermes, one in the other agent,
    and one st-qdrant-memory point."""
    stack.save({"bot": "mythos", "messages": [msg("a1", "1", n=1), msg("a2", "2", n=2)]})
    stack.save({"bot": "mythos", "messages": [msg("b1", "3", channel="c2", n=3)]})
    stack.save({"bot": "mythos", "source": "hermes",
                "messages": [msg("h1", "1", channel="", n=4, conversation_id="s1")]})  # fmt: skip
    stack.save({"bot": "other", "messages": [msg("o1", "1", n=5)]})
    stack.flush("mythos")
    stack.flush("other")
    stack.runtime.store.upsert(
        "mem_mythos", [st_point("[2024-06-10]\nAlex: a1 again\nMythos: yes", "Mythos_1_1,a1")]
    )


def test_delete_by_source_keeps_st_qdrant_memory_points(stack: Stack) -> None:
    seed(stack)
    assert stored(stack) == ["a1", "a2", "b1", "h1"]
    result = delete(stack, {"source": "discord"})
    # the chunks were open (written, kept to grow): their buffered messages go as well
    assert result == {"deleted_points": 2, "rewritten_points": 0, "deleted_buffered": 3,
                      "deleted_dead_letters": 0}  # fmt: skip
    assert stored(stack) == ["h1"]
    kinds = sorted("source" in p for p in stack.payloads("mem_mythos"))
    assert kinds == [False, True]  # st-qdrant-memory's point survived
    assert stored(stack, "mem_other") == ["o1"]  # always within one agent


def test_delete_by_conversation(stack: Stack) -> None:
    seed(stack)
    assert delete(stack, {"source": "discord", "channel_id": "c2"})["deleted_points"] == 1
    assert stored(stack) == ["a1", "a2", "h1"]
    assert delete(stack, {"source": "hermes", "conversation_id": "s1"})["deleted_points"] == 1
    assert stored(stack) == ["a1", "a2"]


def test_delete_by_message_id_reaches_st_qdrant_memory_points(stack: Stack) -> None:
    seed(stack)
    result = delete(stack, {"message_id": "a1"})
    # the st-qdrant-memory point goes whole (it cannot be rebuilt); memory-pool's open chunk
    # a1+a2 is written again from its buffer, without a1
    assert (result["deleted_points"], result["rewritten_points"]) == (1, 1)
    stack.flush("mythos")
    assert stored(stack) == ["a2", "b1", "h1"]
    assert all("a1" not in p["messageIds"] for p in stack.payloads("mem_mythos"))


def test_delete_by_user(stack: Stack) -> None:
    seed(stack)
    result = delete(stack, {"user_id": "1"})
    assert (result["deleted_points"], result["rewritten_points"]) == (1, 1)  # h1; a1+a2 -> a2
    stack.flush("mythos")
    assert stored(stack) == ["a2", "b1"]


def test_deleted_ids_are_never_stored_again(stack: Stack) -> None:
    seed(stack)
    delete(stack, {"source": "discord", "channel_id": "c1"})
    again = stack.save({"bot": "mythos", "messages": [msg("a1", "1", n=1), msg("a3", "1", n=9)]})
    assert again == {"accepted": 1, "duplicates": 1, "skipped": 0}
    stack.flush("mythos")
    assert stored(stack) == ["a3", "b1", "h1"]


def test_buffered_messages_of_a_deleted_scope_go_too(stack: Stack) -> None:
    stack.save({"bot": "mythos", "messages": [msg("x1", "7", n=1), msg("x2", "8", n=2)]})
    result = delete(stack, {"user_id": "7"})
    assert result == {"deleted_points": 0, "rewritten_points": 0, "deleted_buffered": 1,
                      "deleted_dead_letters": 0}  # fmt: skip
    stack.flush("mythos")
    assert stored(stack) == ["x2"]


def test_a_message_deleted_from_a_written_open_chunk_does_not_come_back(stack: Stack) -> None:
    stack.save({"bot": "mythos", "messages": [msg("y1", "1", n=1), msg("y2", "2", n=2)]})
    stack.flush("mythos")  # the open chunk y1+y2 is written and stays open
    assert stored(stack) == ["y1", "y2"]
    assert delete(stack, {"message_id": "y1"}) == {
        "deleted_points": 0, "rewritten_points": 1, "deleted_buffered": 1,
        "deleted_dead_letters": 0,
    }  # fmt: skip
    assert stored(stack) == []  # its point is gone at once; y2 waits in the buffer
    stack.save({"bot": "mythos", "messages": [msg("y1", "1", n=1), msg("y3", "2", n=3)]})
    stack.flush("mythos")
    assert stored(stack) == ["y2", "y3"]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"source": "discord", "message_id": "a1"},
        {"message_id": "a1", "user_id": "1"},
        {"channel_id": "c1"},
        {"source": "discord", "channel_id": "c1", "conversation_id": "s"},
        {"everything": True},
    ],
)
def test_a_delete_names_exactly_one_scope(stack: Stack, body: dict[str, Any]) -> None:
    response = stack.client.post("/agents/mythos/delete", json=body)
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_request"


def test_unknown_agent(stack: Stack) -> None:
    assert stack.client.post("/agents/nobody/delete", json={"source": "x"}).status_code == 404
    assert stack.client.get("/agents/nobody/stats").status_code == 404


def test_stats(stack: Stack) -> None:
    seed(stack)
    stack.save({"bot": "mythos", "messages": [msg("z1", "1", channel="c9", n=50)]})
    stats = stack.client.get("/agents/mythos/stats").json()
    assert stats["collection"] == "mem_mythos"
    assert stats["points"] == 4
    assert stats["points_by_source"] == {"discord": 2, "hermes": 1}
    assert stats["points_without_source"] == 1
    # z1, and the open chunks a1+a2, b1 and h1 (written, kept open to grow)
    assert stats["buffered_messages"] == 5
    assert stats["conversations"] == 4
    assert stats["last_write"] is not None

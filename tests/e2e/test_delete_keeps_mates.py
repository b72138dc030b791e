"""Deleting one message keeps its chunk-mates, on both stores: the chunk is written again
without it (and removed only when nothing is left); chunks that cannot be rebuilt still go
whole, as before."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from shared.agents import AgentConfig, Agents
from shared.format.fields import CHUNK_MESSAGES
from shared.store.interface import PointToWrite
from tests.e2e.test_edits import CLOCK, COLLECTION, RAIN, holders, lexical, msg, points, save
from tests.support.embedding_server import EmbeddingServer
from tests.support.qdrant_server import QdrantTestServer
from tests.support.stack import Stack, running_stack, stack_settings
from tests.support.store_stacks import stack_on
from tests.support.stores import KINDS

# a third one, with a word no other has
SNOW = "Snowdrops came up along the garden wall before anyone expected them, " * 5 + "truly"


AGENTS = Agents([AgentConfig(name="mythos", self_speaker="Mythos", idle_flush_seconds=60,
                             chunk_max_chars=1200, chunk_min_chars=900)],
                accept_unlisted=False)  # fmt: skip


@pytest.fixture(params=KINDS)
def stack(
    request: pytest.FixtureRequest, redis_url: str, embeddings: EmbeddingServer, tmp_path: Path
) -> Iterator[Stack]:
    with stack_on(request.param, redis_url, embeddings.url, tmp_path, AGENTS) as running:
        yield running


def delete(stack: Stack, body: dict[str, Any]) -> dict[str, Any]:
    response = stack.client.post("/agents/mythos/delete", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def three_in_one_chunk(stack: Stack) -> tuple[str, dict[str, Any]]:
    """m1 (user 1), m2 (user 2), m3 (user 1): one closed, written chunk."""
    sent = [msg("m1", CLOCK, 1), msg("m2", RAIN, 2, user="2"), msg("m3", SNOW, 3)]
    assert save(stack, *sent)["accepted"] == 3
    stack.flush("mythos")
    [(pid, payload)] = points(stack).items()
    assert payload["messageIdList"] == ["m1", "m2", "m3"]
    return pid, payload


def test_deleting_one_message_rewrites_its_chunk_without_it(stack: Stack) -> None:
    pid, before = three_in_one_chunk(stack)
    assert pid in lexical(stack, "rain")
    result = delete(stack, {"message_id": "m2"})
    assert result == {"deleted_points": 0, "rewritten_points": 1, "deleted_buffered": 0,
                      "deleted_dead_letters": 0}  # fmt: skip
    after = points(stack)
    assert list(after) == [pid]  # the same point: its id came from m1, which stays
    payload = after[pid]
    assert payload["messageIdList"] == ["m1", "m3"] and payload["messageIds"] == "m1,m3"
    assert "rain" not in payload["text"] and CLOCK in payload["text"] and SNOW in payload["text"]
    assert payload["speakers"] == "user1" and payload["userIdList"] == ["1"]
    assert payload["messageCount"] == 2 and payload["timestamp"] == before["timestamp"]
    assert pid not in lexical(stack, "rain") and pid in lexical(stack, "snowdrops")
    # the deleted id stays deleted; its chunk-mates are still known, not deleted
    assert save(stack, msg("m2", RAIN, 2, user="2"))["duplicates"] == 1
    assert save(stack, msg("m1", CLOCK, 1), msg("m3", SNOW, 3))["duplicates"] == 2
    stack.flush("mythos")
    assert holders(stack) == {"m1": [pid], "m3": [pid]}


def test_deleting_a_users_messages_keeps_the_others(stack: Stack) -> None:
    pid, _ = three_in_one_chunk(stack)
    result = delete(stack, {"user_id": "1"})
    assert (result["deleted_points"], result["rewritten_points"]) == (0, 1)
    found = holders(stack)
    assert list(found) == ["m2"] and found["m2"] != [pid]  # moved: its id came from m1
    [payload] = points(stack).values()
    assert payload["text"].endswith(f"user2: {RAIN}") and payload["speakers"] == "user2"
    assert save(stack, msg("m1", CLOCK, 1), msg("m3", SNOW, 3))["duplicates"] == 2
    stack.flush("mythos")
    assert list(holders(stack)) == ["m2"]


def test_a_chunk_left_with_nothing_is_deleted(stack: Stack) -> None:
    three_in_one_chunk(stack)
    delete(stack, {"user_id": "2"})
    result = delete(stack, {"user_id": "1"})
    assert (result["deleted_points"], result["rewritten_points"]) == (1, 0)
    assert points(stack) == {}


def test_a_chunk_that_cannot_be_rebuilt_still_goes_whole(stack: Stack) -> None:
    """Points written before chunks kept their messages: the delete takes the chunk whole, and
    tombstones its other messages too (a re-send would store them twice otherwise)."""
    pid, payload = three_in_one_chunk(stack)
    store = stack.runtime.store
    older = {key: value for key, value in payload.items() if key != CHUNK_MESSAGES}
    [point] = [p for p in store.iter_points(COLLECTION) if p.id == pid]
    store.upsert(COLLECTION, [PointToWrite(pid, list(point.vector or []), older)])
    result = delete(stack, {"message_id": "m2"})
    assert (result["deleted_points"], result["rewritten_points"]) == (1, 0)
    assert points(stack) == {}
    assert save(stack, msg("m1", CLOCK, 1))["duplicates"] == 1


def test_a_preview_says_what_would_be_rewritten(stack: Stack) -> None:
    three_in_one_chunk(stack)
    response = stack.client.post("/agents/mythos/delete/preview", json={"message_id": "m2"})
    assert response.json() == {"points": 0, "message_ids": 1, "points_without_source": 0,
                               "points_rewritten": 1}  # fmt: skip


def test_a_delete_after_an_edit_of_a_written_open_chunk_keeps_no_old_text(stack: Stack) -> None:
    """Review: the edit reset `written`, so the delete took the open chunk's point for a closed
    one and wrote it again from its stale copy (m2's text before the edit) under m2's id."""
    save(stack, msg("m1", "short one but kept", 1), msg("m2", "another kept line", 2))
    stack.flush("mythos")  # the open chunk, written under m1's id and kept buffered
    assert save(stack, msg("m2", "another line, edited", 2))["edited"] == 1
    delete(stack, {"message_id": "m1"})
    assert all("another kept line" not in p["text"] for p in points(stack).values())
    stack.flush("mythos")
    [payload] = points(stack).values()
    assert payload["messageIdList"] == ["m2"]
    assert payload["text"].endswith("user1: another line, edited")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "changed", [{"EMBEDDING_DIMENSIONS": 64}, {"EMBEDDING_MODEL": "another-model"}]
)
def test_a_delete_on_an_agent_whose_writes_are_held_takes_the_chunk_whole(
    kind: str,
    changed: dict[str, Any],
    redis_url: str,
    embeddings: EmbeddingServer,
    tmp_path: Path,
) -> None:
    """Review: the chunk-mates were embedded with the configured model and written into a
    collection of another size (refused: 400, and the deleted message stayed stored) or of
    another model (its vectors silently mixed). Writes to such a collection are held; a
    delete takes the chunk whole, as it takes one that cannot be rebuilt."""
    with ExitStack() as stacked:
        extra: dict[str, Any] = {}
        if kind == "server":  # one Qdrant server for both deployments
            extra["QDRANT_URL"] = stacked.enter_context(QdrantTestServer(tmp_path / "q")).url
        with running_stack(stack_settings(redis_url, embeddings.url, tmp_path, **extra),
                           AGENTS) as before:  # fmt: skip
            three_in_one_chunk(before)
        settings = stack_settings(redis_url, embeddings.url, tmp_path, **extra, **changed)
        with running_stack(settings, AGENTS) as held:
            result = delete(held, {"message_id": "m2"})
            assert (result["deleted_points"], result["rewritten_points"]) == (1, 0)
            assert points(held) == {}  # nothing written by a model it was not made with
            assert save(held, msg("m1", CLOCK, 1))["duplicates"] == 1  # tombstoned, as before

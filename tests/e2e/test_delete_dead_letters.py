"""A delete reaches the dead letters as it reaches stored chunks, on both stores: a letter keeps
its other messages (a replay stores them), goes when nothing is left or the delete covers it,
and every message id it loses is tombstoned (a re-send never stores it again)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.state import keys
from tests.e2e.test_delete_keeps_mates import AGENTS, SNOW, delete
from tests.e2e.test_edits import CLOCK, COLLECTION, RAIN, holders, msg, save, wait_for
from tests.support.embedding_server import EmbeddingServer
from tests.support.stack import Stack
from tests.support.store_stacks import stack_on
from tests.support.stores import KINDS


@pytest.fixture(params=KINDS)
def stack(
    request: pytest.FixtureRequest, redis_url: str, embeddings: EmbeddingServer, tmp_path: Path
) -> Iterator[Stack]:
    with stack_on(request.param, redis_url, embeddings.url, tmp_path, AGENTS) as running:
        yield running


def one_dead_letter(stack: Stack, embeddings: EmbeddingServer) -> None:
    """m1 (user 1, the refused word), m2 (user 2), m3 (user 1): one chunk, dead-lettered."""
    embeddings.reject_inputs_containing("POISON")
    sent = [msg("m1", f"POISON {CLOCK}", 1), msg("m2", RAIN, 2, user="2"), msg("m3", SNOW, 3)]
    assert save(stack, *sent)["accepted"] == 3
    stack.flush("mythos")
    assert letters(stack) == [["m1", "m2", "m3"]]


def letters(stack: Stack) -> list[list[str]]:
    return [e["message_ids"] for e in stack.client.get("/dead-letters").json()["entries"]]


def deleted(stack: Stack, message_id: str) -> bool:
    mark = stack.runtime.redis.get(keys.seen(COLLECTION, "discord", message_id))
    return mark == keys.TOMBSTONE.encode()


def replayed(stack: Stack, embeddings: EmbeddingServer) -> dict[str, list[str]]:
    embeddings.clear_faults()
    assert stack.client.post("/dead-letters/replay", json={"bot": "mythos"}).status_code == 202
    wait_for(lambda: not letters(stack) and bool(holders(stack)))
    return holders(stack)


def test_deleting_one_message_keeps_its_letter_mates(
    stack: Stack, embeddings: EmbeddingServer
) -> None:
    """Review: the letter went whole (taking m1 and m3 with it) and m2 was not tombstoned."""
    one_dead_letter(stack, embeddings)
    result = delete(stack, {"message_id": "m2"})
    assert result["deleted_dead_letters"] == 1
    assert letters(stack) == [["m1", "m3"]]
    assert deleted(stack, "m2") and not deleted(stack, "m1")
    assert save(stack, msg("m2", RAIN, 2, user="2"))["accepted"] == 0  # stays deleted
    assert set(replayed(stack, embeddings)) == {"m1", "m3"}


def test_deleting_a_users_messages_keeps_the_others_in_the_letter(
    stack: Stack, embeddings: EmbeddingServer
) -> None:
    one_dead_letter(stack, embeddings)
    assert delete(stack, {"user_id": "1"})["deleted_dead_letters"] == 1
    assert letters(stack) == [["m2"]]
    assert deleted(stack, "m1") and deleted(stack, "m3") and not deleted(stack, "m2")
    assert set(replayed(stack, embeddings)) == {"m2"}


def test_a_letter_left_with_nothing_goes(stack: Stack, embeddings: EmbeddingServer) -> None:
    one_dead_letter(stack, embeddings)
    for mid in ("m1", "m2", "m3"):
        assert delete(stack, {"message_id": mid})["deleted_dead_letters"] == 1
    assert letters(stack) == []
    assert all(deleted(stack, mid) for mid in ("m1", "m2", "m3"))


@pytest.mark.parametrize("scope", [{"source": "discord", "channel_id": "c1"},
                                   {"source": "discord"}])  # fmt: skip
def test_a_delete_that_covers_the_letter_takes_it_whole(
    stack: Stack, embeddings: EmbeddingServer, scope: dict[str, Any]
) -> None:
    one_dead_letter(stack, embeddings)
    assert delete(stack, scope)["deleted_dead_letters"] == 1
    assert letters(stack) == []
    assert all(deleted(stack, mid) for mid in ("m1", "m2", "m3"))

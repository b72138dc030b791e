"""End to end through the Celery worker: open chunks written when idle or on demand, then grown."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from shared.agents import AgentConfig, Agents
from shared.format.naming import collection_name, point_id
from shared.state import keys
from shared.state.conversations import ConversationRef
from tests.support.embedding_server import EmbeddingServer
from tests.support.stack import Stack, running_stack, stack_settings

BASE_TS = 1_718_000_000_000
SHORT = "a short line about the harbour"
LONG = "the lighthouse keeper wrote the longest letter of his life " * 7  # closes a chunk
T = TypeVar("T")


@pytest.fixture
def stack(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[Stack]:
    agents = Agents(
        [
            AgentConfig(name="idler", self_speaker="Idler", idle_flush_seconds=0.5),
            AgentConfig(name="keeper", self_speaker="Keeper"),  # idle timer of 60 s
        ],
        accept_unlisted=False,
    )
    with running_stack(stack_settings(redis_url, embeddings.url, tmp_path), agents) as running:
        yield running


def save(stack: Stack, bot: str, *messages: tuple[int, str]) -> None:
    body = {
        "bot": bot,
        "messages": [
            {
                "message_id": f"m{n}",
                "text": text,
                "ts": BASE_TS + n * 60_000,
                "user_id": "111",
                "speaker_name": "Alex",
                "channel_id": "c1",
            }
            for n, text in messages
        ],
    }
    assert stack.save(body)["accepted"] == len(messages)


def points(stack: Stack, collection: str) -> dict[str, list[str]]:
    """Point id -> its message ids."""
    return {pid: p["messageIdList"] for pid, p in stack.runtime.store.scroll_payloads(collection)}


def wait_for(probe: Callable[[], T], done: Callable[[T], bool], timeout: float = 10.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if done(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting; last seen {value!r}")
        time.sleep(0.02)


def conversation_state(stack: Stack, bot: str) -> dict[str, Any]:
    key = ConversationRef(collection_name(bot), source="discord", channel_id="c1").key
    client = stack.runtime.redis
    return {
        "buffered": client.llen(keys.buffer(key)),
        "written": int(client.hget(keys.meta(key), "written") or 0),
        "due": client.zscore(keys.DUE, key),
    }


def test_open_chunk_is_written_when_quiet_and_grows_in_place(stack: Stack) -> None:
    pid = point_id("mem_idler", "discord", "m1")
    save(stack, "idler", (1, f"{SHORT} one"), (2, f"{SHORT} two"))
    assert wait_for(lambda: points(stack, "mem_idler"), bool) == {pid: ["m1", "m2"]}

    # Two more messages, one right after the other: one rewrite once quiet, not one each.
    seen: list[dict[str, list[str]]] = []

    def probe() -> dict[str, list[str]]:
        seen.append(points(stack, "mem_idler"))
        return seen[-1]

    save(stack, "idler", (3, f"{SHORT} three"))
    save(stack, "idler", (4, f"{SHORT} four"))
    grown = wait_for(probe, lambda found: len(found[pid]) == 4)
    assert grown == {pid: ["m1", "m2", "m3", "m4"]}
    assert all(found[pid] in (["m1", "m2"], ["m1", "m2", "m3", "m4"]) for found in seen)
    assert conversation_state(stack, "idler") == {"buffered": 4, "written": 4, "due": None}

    # A long message closes the chunk; the next one opens a new chunk, written once quiet.
    save(stack, "idler", (5, LONG), (6, f"{SHORT} six"))
    final = wait_for(lambda: points(stack, "mem_idler"), lambda found: len(found) == 2)
    assert final == {
        pid: ["m1", "m2", "m3", "m4", "m5"],
        point_id("mem_idler", "discord", "m6"): ["m6"],
    }
    stack.wait_idle()
    assert conversation_state(stack, "idler") == {"buffered": 1, "written": 1, "due": None}


def test_flush_endpoint_writes_the_open_chunk_without_closing_it(stack: Stack) -> None:
    pid = point_id("mem_keeper", "discord", "m1")
    save(stack, "keeper", (1, f"{SHORT} one"), (2, f"{SHORT} two"))
    assert points(stack, "mem_keeper") == {}  # 60 s from its idle timer

    assert stack.flush("keeper")["conversations"] == 1
    assert points(stack, "mem_keeper") == {pid: ["m1", "m2"]}
    state = conversation_state(stack, "keeper")
    assert state == {"buffered": 2, "written": 2, "due": None}  # still open, nothing due

    save(stack, "keeper", (3, f"{SHORT} three"))
    assert stack.flush("keeper") == {
        "conversations": 1, "pending": 0, "quarantined": 0, "done": True
    }  # fmt: skip
    assert points(stack, "mem_keeper") == {pid: ["m1", "m2", "m3"]}  # the same point, grown
    assert conversation_state(stack, "keeper") == {"buffered": 3, "written": 3, "due": None}

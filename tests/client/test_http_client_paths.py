"""The client puts agent names, point ids and message ids into URL paths: each is one path
segment, never a way to reach another endpoint or another agent (failed on main faf5386: httpx
resolves "../" in a path, so delete_memory("clerk", "../../other/memories/<id>") deleted
other's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from client.http_client import MemoryPoolClient, MemoryPoolError
from tests.support.embedding_server import EmbeddingServer
from tests.support.live_server import Live, live_memory_pool

AGENTS_FILE = {"agents": [{"name": "clerk"}, {"name": "other"}]}


@pytest.fixture
def live(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[Live]:
    with live_memory_pool(redis_url, embeddings.url, tmp_path, AGENTS_FILE) as up:
        yield up


def test_a_crafted_point_id_or_name_cannot_reach_another_agent(live: Live) -> None:
    text = "the lighthouse keeper sang to the whales"
    with MemoryPoolClient(live.url) as client:
        for bot in ("clerk", "other"):
            body = {"message_id": f"{bot}-1", "text": text, "ts": 1_718_000_000_000,
                    "conversation_id": "c1", "user_id": "u1"}  # fmt: skip
            assert client.save(bot, [body])["accepted"] == 1
            assert client.flush(bot)["done"]
        theirs = client.memories("other")["memories"][0]["id"]
        for call in (
            lambda: client.delete_memory("clerk", f"../../other/memories/{theirs}"),
            lambda: client.delete_memory("clerk", f"..%2F..%2Fother%2Fmemories%2F{theirs}"),
            lambda: client.memory("clerk", f"../../other/memories/{theirs}"),
            lambda: client.delete_memory("../agents/other", theirs),
            lambda: client.memories("other/memories?x="),
            lambda: client.delete("..", source="discord"),
            lambda: client.edit("clerk", "../../other/messages/other-1", "not theirs"),
            lambda: client.edit("..", "other-1", "not theirs"),
        ):
            with pytest.raises(MemoryPoolError) as refused:
                call()
            assert refused.value.status in (400, 404, 422), refused.value
        assert client.memory("other", theirs)["text"].endswith(text)  # still there, unchanged

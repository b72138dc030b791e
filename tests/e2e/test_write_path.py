"""End to end: Discord-plugin bodies through /save, a real Celery worker, into Qdrant."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.agents import AgentConfig, Agents
from tests.support.embedding_server import EmbeddingServer
from tests.support.stack import Stack, running_stack, stack_settings

BASE_TS = 1_718_000_000_000


@pytest.fixture
def stack(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[Stack]:
    agents = Agents(
        [
            AgentConfig(name="mythos", self_speaker="Mythos", speaker_aliases={"111": "Alex"}),
            AgentConfig(name="polaris", self_speaker="Polaris"),
        ],
        accept_unlisted=False,
    )
    settings = stack_settings(redis_url, embeddings.url, tmp_path)
    with running_stack(settings, agents) as running:
        yield running


def discord_message(n: int, channel: str, *, self_: bool = False) -> dict[str, Any]:
    """The Discord plugin's exact message shape (clients.md §1)."""
    message: dict[str, Any] = {
        "speaker_kind": "self" if self_ else "user",
        "discord_user_id": "999" if self_ else "111",
        "text": f"message number {n} in {channel}: the harbour lights were {n} miles away",
        "message_id": f"{channel}-{n:04d}",
        "ts": BASE_TS + n * 60_000,
        "channel_id": channel,
        "guild_id": "g1",
    }
    if not self_:
        message["speaker_name"] = "alex_on_discord"
    return message


def test_resent_history_ends_as_chunks_each_message_once(stack: Stack) -> None:
    history: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for turn in range(40):
        for bot, channel in [("mythos", "c1"), ("mythos", "c2"), ("polaris", "c1")]:
            log = history.setdefault((bot, channel), [])
            log.append(discord_message(turn, channel, self_=turn % 2 == 1))
            # The plugin re-sends its last 30 messages every turn.
            counts = stack.save({"bot": bot, "messages": log[-30:]})
            assert counts["accepted"] == 1
            assert counts["duplicates"] == len(log[-30:]) - 1
    stack.flush("mythos")
    stack.flush("polaris")

    for bot, collection, channels in [("mythos", "mem_mythos", ["c1", "c2"]),
                                      ("polaris", "mem_polaris", ["c1"])]:  # fmt: skip
        payloads = stack.payloads(collection)
        stored = [mid for p in payloads for mid in p["messageIdList"]]
        expected = [m["message_id"] for ch in channels for m in history[(bot, ch)]]
        assert sorted(stored) == sorted(expected)  # every message exactly once
        for payload in payloads:
            assert payload["source"] == "discord"
            assert payload["isChunk"] is True
            assert payload["messageIds"] == ",".join(payload["messageIdList"])
            assert payload["messageCount"] == len(payload["messageIdList"])
            assert payload["guildId"] == "g1"
    one = next(p for p in stack.payloads("mem_mythos") if "c1-0000" in p["messageIdList"])
    assert one["text"].startswith(
        "[2024-06-10]\nAlex: message number 0 in c1: the harbour lights were 0 miles away\n"
        "Mythos: message number 1 in c1"
    )
    assert one["speakers"] == "Alex, Mythos"
    assert one["timestamp"] == BASE_TS
    assert one["userIdList"] == ["111", "999"]

"""An agent is its collection: every spelling of a name that reaches one collection is one agent,
for dedupe, buffers, tombstones, stats, keys and require_key (issue: hostile input)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from shared.agents import AgentConfig, Agents, ApiKey
from tests.support.embedding_server import EmbeddingServer
from tests.support.stack import Stack, running_stack, stack_settings

BASE_TS = 1_718_000_000_000
POLARIS_KEY = "polaris-only-key-0123456789"


def msg(mid: str, n: int = 0, **extra: Any) -> dict[str, Any]:
    return {"message_id": mid, "text": f"message {mid} holds something worth remembering",
            "ts": BASE_TS + n * 1000, "channel_id": "c1", "discord_user_id": "7",
            "speaker_name": "alex", **extra}  # fmt: skip


@pytest.fixture
def open_stack(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[Stack]:
    """No agents file: any name is accepted (the one-command install)."""
    settings = stack_settings(redis_url, embeddings.url, tmp_path)
    with running_stack(settings, Agents([], accept_unlisted=True)) as running:
        yield running


def ids_in(stack: Stack, collection: str) -> list[list[str]]:
    return sorted(p.get("messageIdList", []) for p in stack.payloads(collection))


def test_spellings_of_one_collection_share_dedupe_and_do_not_overwrite(open_stack: Stack) -> None:
    stack = open_stack
    assert (
        stack.save({"bot": "Dr. Smith", "messages": [msg("m100", 0), msg("m101", 1)]})["accepted"]
        == 2
    )
    stack.flush("Dr. Smith")
    before = stack.payloads("mem_dr_smith")
    # Observed: another spelling re-sending m100 stored it again and overwrote the chunk.
    again = stack.save({"bot": "dr smith", "messages": [msg("m100", 0)]})
    assert again == {"accepted": 0, "duplicates": 1, "skipped": 0} | _refusal_fields(again)
    stack.flush("dr smith")
    assert stack.payloads("mem_dr_smith") == before
    # with another text it is an edit of the same message, in the same chunk
    edited = stack.save({"bot": "dr smith", "messages": [msg("m100", 0, text="edited text!")]})
    assert edited["edited"] == 1
    stack.flush("dr smith")
    [payload] = stack.payloads("mem_dr_smith")
    assert payload["messageIdList"] == ["m100", "m101"] and "edited text!" in payload["text"]
    for spelling in ("dr smith", "dr__smith", "DR.SMITH!"):
        stats = stack.client.get(f"/agents/{spelling}/stats").json()
        assert (stats["collection"], stats["points"]) == ("mem_dr_smith", 1)


def _refusal_fields(answer: dict[str, Any]) -> dict[str, Any]:
    """Fields /save may add beside the three counts (per-message refusals)."""
    return {k: v for k, v in answer.items() if k not in ("accepted", "duplicates", "skipped")}


def test_a_delete_by_one_spelling_holds_for_every_other(open_stack: Stack) -> None:
    stack = open_stack
    stack.save({"bot": "Dr. Smith", "messages": [msg("m100", 0), msg("m200", 1)]})
    stack.flush("Dr. Smith")
    response = stack.client.post("/agents/dr__smith/delete", json={"message_id": "m200"})
    assert response.status_code == 200 and response.json()["rewritten_points"] == 1
    # Observed: the deleted m200 came back when Dr. Smith's open chunk grew (tombstones were
    # keyed by the deleting spelling).
    answer = stack.save({"bot": "Dr. Smith", "messages": [msg("m200", 1), msg("m300", 2)]})
    assert (answer["accepted"], answer["duplicates"]) == (1, 1)
    stack.flush("Dr. Smith")
    assert ids_in(stack, "mem_dr_smith") == [["m100", "m300"]]  # m100, its chunk-mate, stays


def test_the_first_spelling_names_an_unlisted_agent(open_stack: Stack) -> None:
    stack = open_stack
    stack.save({"bot": "Dr. Smith", "messages": [msg("s1", 0, speaker_kind="self")]})
    stack.save({"bot": "DR.SMITH!", "messages": [msg("s2", 1, speaker_kind="self")]})
    stack.flush("dr smith")
    [payload] = stack.payloads("mem_dr_smith")
    assert payload["speakers"] == "Dr. Smith"
    assert stack.client.get("/health").json()["redis"]["agents_seen"] == ["Dr. Smith"]


def test_names_differing_beyond_lower_case_are_two_agents(open_stack: Stack) -> None:
    """st-qdrant-memory lower-cases (never casefolds): Straße is mem_stra_e, STRASSE is
    mem_strasse. Observed: both shared one buffer, written to mem_stra_e."""
    stack = open_stack
    stack.save({"bot": "straße", "messages": [msg("x1", 0)]})
    stack.save({"bot": "STRASSE", "messages": [msg("x1", 0)]})  # not a duplicate: another agent
    stack.flush("straße")
    stack.flush("STRASSE")
    assert ids_in(stack, "mem_stra_e") == [["x1"]]
    assert ids_in(stack, "mem_strasse") == [["x1"]]
    stats = stack.client.get("/agents/STRASSE/stats").json()
    assert (stats["collection"], stats["points"]) == ("mem_strasse", 1)


@pytest.fixture
def keyed(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[Stack]:
    agents = Agents(
        [AgentConfig(name="polaris", require_key=True), AgentConfig(name="mythos")],
        accept_unlisted=True,
        api_keys=[ApiKey(name="polaris", key=POLARIS_KEY, agents=("polaris",))],
    )
    settings = stack_settings(redis_url, embeddings.url, tmp_path)
    with running_stack(settings, agents) as running:
        yield running


SPELLINGS = ["polaris.", "Polaris!", "polaris_", "polarisé", "POLARIS?"]


def _calls(client: TestClient, bot: str) -> dict[str, int]:
    """Every agent endpoint, as an unkeyed caller would try them."""
    path = f"/agents/{quote(bot, safe='')}"
    return {
        "save": client.post("/save", json={"bot": bot, "messages": [msg("evil", 9)]}).status_code,
        "retrieve": client.post(
            "/retrieve", json={"bot": bot, "query_text": "message p1"}
        ).status_code,
        "stats": client.get(f"{path}/stats").status_code,
        "known": client.post(f"{path}/known-ids", json={"message_ids": ["p1"]}).status_code,
        "delete": client.post(f"{path}/delete", json={"message_id": "p1"}).status_code,
        "flush": client.post(f"{path}/flush").status_code,
    }


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_require_key_holds_for_every_spelling(keyed: Stack, spelling: str) -> None:
    stack = keyed
    key = {"Authorization": f"Bearer {POLARIS_KEY}"}
    response = stack.client.post("/save", json={"bot": "polaris", "messages": [msg("p1")]},
                                 headers=key)  # fmt: skip
    assert response.status_code == 202
    stack.client.post("/agents/polaris/flush?wait=true", headers=key)
    assert _calls(stack.client, spelling) == dict.fromkeys(_calls(stack.client, "polaris"), 401)
    assert ids_in(stack, "mem_polaris") == [["p1"]]
    # The key scoped to polaris opens polaris under any spelling, and nothing else.
    stats = stack.client.get(f"/agents/{quote(spelling, safe='')}/stats", headers=key)
    assert stats.status_code == 200 and stats.json()["collection"] == "mem_polaris"
    assert stack.client.get("/agents/mythos/stats", headers=key).status_code == 403


def test_unknown_and_protected_agents_look_the_same_without_a_key(
    redis_url: str, embeddings: EmbeddingServer, tmp_path: Path
) -> None:
    agents = Agents(
        [AgentConfig(name="polaris", require_key=True), AgentConfig(name="mythos")],
        accept_unlisted=False,
        api_keys=[ApiKey(name="polaris", key=POLARIS_KEY, agents=("polaris",))],
    )
    settings = stack_settings(redis_url, embeddings.url, tmp_path)
    with running_stack(settings, agents) as stack:
        protected = stack.client.get("/agents/polaris/stats")
        unknown = stack.client.get("/agents/nobody/stats")
        assert protected.status_code == unknown.status_code == 401
        assert protected.json()["error"] == unknown.json()["error"] == "unauthorized"
        scoped = {"X-API-Key": POLARIS_KEY}
        assert stack.client.get("/agents/nobody/stats", headers=scoped).status_code == 403
        assert stack.client.get("/agents/mythos/stats").status_code == 200  # open stays open

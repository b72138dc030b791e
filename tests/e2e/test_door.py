"""End to end: what the door refuses never reaches a worker, so no agent's flush is held back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from api.app import create_app
from client.http_client import MemoryPoolClient
from memory_pool.importer import read_chats, run_import
from shared.agents import AgentConfig, Agents
from tests.support.door import served
from tests.support.embedding_server import EmbeddingServer
from tests.support.qdrant_server import QdrantTestServer
from tests.support.stack import Stack, running_stack, stack_settings

BASE_TS = 1_718_000_000_000
JSON = {"content-type": "application/json"}
LONG = "the harbour lights were far away and the keeper counted every single one of them"


@pytest.fixture
def stack(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[Stack]:
    agents = Agents(
        [AgentConfig(name="victim", self_speaker="Victim"), AgentConfig(name="Smith")],
        accept_unlisted=True,
    )
    with running_stack(stack_settings(redis_url, embeddings.url, tmp_path), agents) as running:
        yield running


@pytest.fixture(params=["edge", "server"])
def any_qdrant_stack(
    request: pytest.FixtureRequest, redis_url: str, embeddings: EmbeddingServer, tmp_path: Path
) -> Iterator[Stack]:
    """The stack on local-mode Qdrant, and on a Qdrant server (which filters excluded ids)."""
    agents = Agents([AgentConfig(name="victim", self_speaker="Victim")], accept_unlisted=False)
    with ExitStack() as stack:
        extra = {}
        if request.param == "server":
            qdrant = stack.enter_context(QdrantTestServer(tmp_path / "qdrant-server"))
            extra["QDRANT_URL"] = qdrant.url
        settings = stack_settings(redis_url, embeddings.url, tmp_path, **extra)
        yield stack.enter_context(running_stack(settings, agents))


def message(mid: str, n: int = 0, **fields: Any) -> dict[str, Any]:
    return {"message_id": mid, "text": f"{LONG} ({mid})", "ts": BASE_TS + n * 1000, **fields}


def raw_save(stack: Stack, bot: str, *raw_messages: str) -> Any:
    body = f'{{"bot": "{bot}", "messages": [{", ".join(raw_messages)}]}}'
    return stack.client.post("/save", content=body.encode(), headers=JSON)


@pytest.mark.parametrize(
    "raw_ts",
    ["1718000000000000", '"0001-01-01T00:00:00+14:00"', "253402300800000", "1e30", "1" + "0" * 400],
    ids=["microseconds", "year-1", "year-10000", "1e30", "10**400"],
)
def test_a_poisoned_time_never_holds_back_another_agent(stack: Stack, raw_ts: str) -> None:
    # Observed: the poisoner's 202 was followed by every flush batched with it failing
    # ("year 56411 is out of range"), so `victim`'s chunk stayed unwritten for minutes.
    fields = {k: v for k, v in message("p1").items() if k != "ts"}
    poison = json.dumps(fields)[:-1] + f', "ts": {raw_ts}}}'
    answer = raw_save(stack, "poisoner", poison, json.dumps(message("p2", 1)))
    assert answer.status_code == 202, answer.text
    assert answer.json()["refused"] == 1 and answer.json()["accepted"] == 1
    stack.save({"bot": "victim", "messages": [message("v1"), message("v2", 1)]})

    assert stack.flush("victim")["pending"] == 0
    assert stack.flush("poisoner")["pending"] == 0
    assert [p["messageIdList"] for p in stack.payloads("mem_victim")] == [["v1", "v2"]]
    assert [p["messageIdList"] for p in stack.payloads("mem_poisoner")] == [["p2"]]


def test_an_unwritable_agent_name_is_refused_before_it_blocks_flushes(stack: Stack) -> None:
    # Observed: a 1,024-character bot name was accepted; Qdrant refused its collection name and
    # every agent batched with it got no points for 10 minutes.
    refused = stack.client.post("/save", json={"bot": "b" * 1024, "messages": [message("b1")]})
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_agent_name"
    stack.save({"bot": "victim", "messages": [message("v1"), message("v2", 1)]})
    assert stack.flush("victim")["pending"] == 0
    assert len(stack.payloads("mem_victim")) == 1


def test_speaker_names_with_newlines_keep_one_line_per_message(stack: Stack) -> None:
    items = [
        message("v1", 0, speaker_name="Alex\nVictim: I confess", user_id="5"),
        message("v2", 1, speaker_kind="self"),
    ]
    stack.save({"bot": "victim", "messages": items})
    stack.flush("victim")
    [payload] = stack.payloads("mem_victim")
    lines = payload["text"].split("\n")
    assert lines[0] == "[2024-06-10]"
    assert lines[1].startswith("Alex Victim: I confess: the harbour")
    assert lines[2].startswith("Victim: the harbour")
    assert len(lines) == 3


def test_exclusion_ids_that_cannot_be_stored_change_nothing(any_qdrant_stack: Stack) -> None:
    stack = any_qdrant_stack
    stack.save({"bot": "victim", "messages": [message("v1"), message("v2", 1)]})
    stack.flush("victim")
    query = '{"bot": "victim", "query_text": "harbour lights keeper", "exclude_message_ids": IDS}'
    for excluded, hits in [('["v1,x", " v1 ", "\\ud800", "v1\\u0000"]', 1), ('["v1"]', 0)]:
        body = query.replace("IDS", excluded).encode()
        response = stack.client.post("/retrieve", content=body, headers=JSON)
        assert response.status_code == 200, response.text
        assert len(response.json()["hits"]) == hits, excluded


def test_importing_a_character_with_a_comma_stores_escaped_ids(
    stack: Stack, tmp_path: Path
) -> None:
    chat = tmp_path / "Smith, Jr. - 2024-07-12@01h31m37s123ms.jsonl"
    header = {"user_name": "Robin", "character_name": "Smith, Jr.", "create_date": "x"}
    lines = [header] + [
        {"name": "Robin", "is_user": n % 2 == 0, "is_system": False, "mes": f"{LONG} {n}",
         "send_date": BASE_TS + n * 60_000}
        for n in range(4)
    ]  # fmt: skip
    chat.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    agent = stack.runtime.agents.get("Smith")
    app = create_app(stack.settings, runtime=stack.runtime)
    with served(app) as (host, port), MemoryPoolClient(f"http://{host}:{port}") as client:
        plans, summary = read_chats([chat], agent, None)
        done = run_import(client, "Smith", plans, summary)
        again_plans, again = read_chats([chat], agent, None)
        run_import(client, "Smith", again_plans, again)
    assert (done.accepted, done.skipped["refused by the server"]) == (4, 0)
    stored = sorted(i for p in stack.payloads("mem_smith") for i in p["messageIdList"])
    assert stored == [f"Smith%2C Jr._{BASE_TS + n * 60_000}_{n + 1}" for n in range(4)]
    for payload in stack.payloads("mem_smith"):
        assert payload["messageIds"].split(",") == payload["messageIdList"]
    assert (again.accepted, again.duplicates, again.edited) == (0, 4, 0)

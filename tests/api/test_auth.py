"""Optional API keys: open agents stay open, key-requiring agents and global endpoints don't."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from shared.agents import AgentConfig, Agents, ApiKey
from shared.runtime import Runtime
from tests.support.embedding_server import EmbeddingServer
from tests.support.stack import stack_settings

ALL = "all-agents-key-0123456789"
MYTHOS = "mythos-only-key-0123456789"


@pytest.fixture
def client(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[TestClient]:
    agents = Agents(
        [AgentConfig(name="open"), AgentConfig(name="mythos", require_key=True),
         AgentConfig(name="secret", require_key=True)],
        accept_unlisted=False,
        api_keys=[ApiKey(name="ops", key=ALL), ApiKey(name="bot", key=MYTHOS, agents=("Mythos",))],
    )  # fmt: skip
    settings = stack_settings(redis_url, embeddings.url, tmp_path)
    runtime = Runtime.build(settings, agents=agents)
    try:
        with TestClient(create_app(settings, runtime=runtime)) as test_client:
            yield test_client
    finally:
        runtime.close()


def save(bot: str) -> dict:
    return {"bot": bot, "messages": [{"message_id": "1", "text": "hello there friend"}]}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.mark.parametrize(
    ("bot", "headers", "status", "error"),
    [
        ("open", {}, 202, None),  # the Discord plugin cannot send a key
        ("open", bearer(ALL), 202, None),
        ("open", bearer(MYTHOS), 403, "forbidden"),  # a key limited to other agents
        ("mythos", {}, 401, "unauthorized"),
        ("mythos", bearer(MYTHOS), 202, None),
        ("mythos", {"X-API-Key": MYTHOS}, 202, None),
        ("mythos", bearer(ALL), 202, None),
        ("mythos", bearer("wrong-key-0123456789"), 401, "unauthorized"),
        ("secret", bearer(MYTHOS), 403, "forbidden"),
        ("nobody", bearer(ALL), 404, "unknown_agent"),
    ],
)
def test_save_access(
    client: TestClient, bot: str, headers: dict, status: int, error: str | None
) -> None:
    response = client.post("/save", json=save(bot), headers=headers)
    assert response.status_code == status, response.text
    if error:
        assert response.json()["error"] == error


def test_retrieve_and_agent_endpoints_follow_the_same_rules(client: TestClient) -> None:
    body = {"bot": "mythos", "query_text": "hello"}
    assert client.post("/retrieve", json=body).status_code == 401
    assert client.post("/retrieve", json=body, headers=bearer(MYTHOS)).status_code == 200
    assert client.get("/agents/mythos/stats").status_code == 401
    assert client.get("/agents/mythos/stats", headers=bearer(MYTHOS)).status_code == 200
    delete = {"source": "discord"}
    assert (
        client.post("/agents/secret/delete", json=delete, headers=bearer(MYTHOS)).status_code == 403
    )
    assert client.get("/agents/open/stats").status_code == 200


def test_endpoints_spanning_all_agents_need_an_unrestricted_key(client: TestClient) -> None:
    assert client.get("/dead-letters").status_code == 401
    assert client.get("/dead-letters", headers=bearer(MYTHOS)).status_code == 403
    assert client.get("/dead-letters", headers=bearer(ALL)).status_code == 200
    assert client.post("/dead-letters/replay", headers=bearer(ALL)).status_code == 202


def test_api_keys_in_the_agents_file(tmp_path: Path) -> None:
    from shared.agents import load_agents
    from shared.errors import ConfigError

    path = tmp_path / "agents.yaml"
    path.write_text(
        f"api_keys:\n  - name: bot\n    key: {MYTHOS}\n    agents: [mythos]\n"
        "agents:\n  - name: mythos\n    require_key: true\n",
        encoding="utf-8",
    )
    agents = load_agents(path)
    assert agents.get("mythos").require_key is True
    key = agents.api_keys[0]
    assert agents.key_allows(key, agents.get("MYTHOS")) and not agents.key_allows(key, None)
    path.write_text("api_keys:\n  - name: short\n    key: abc\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"api_keys\[0\]\.key: String should have at least 16"):
        load_agents(path)

"""Exposure: what /health tells a stranger, wrong keys before the body, and the Host header."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx
import pytest
import yaml

from shared.agents import ApiKey
from tests.support.door import (
    MakeApp,
    agents,
    client_for,
    is_error_shape,
    raw_request,
    read_response,
    served,
)
from tests.support.embedding_server import EmbeddingServer

ALL = "all-agents-key-0123456789"
MYTHOS = "mythos-only-key-0123456789"
ROOT = Path(__file__).resolve().parents[2]
KEYS = [ApiKey(name="ops", key=ALL), ApiKey(name="bot", key=MYTHOS, agents=("mythos",))]


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


# --- /health --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers", [{}, bearer(MYTHOS), {"X-API-Key": MYTHOS}], ids=["no-key", "agent-key", "x-api"]
)
def test_health_without_an_all_agents_key_says_only_ok_or_degraded(
    make_app: MakeApp, headers: dict[str, str]
) -> None:
    with client_for(make_app(agents(api_keys=KEYS))) as client:
        assert client.post("/save", json={"bot": "mythos", "messages": []}).status_code == 202
        response = client.get("/health", headers=headers)
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}  # no agent names, collections or counts


def test_health_with_an_all_agents_key_is_the_full_report(make_app: MakeApp) -> None:
    with client_for(make_app(agents(api_keys=KEYS))) as client:
        report = client.get("/health", headers=bearer(ALL)).json()
    assert report["status"] == "ok"
    assert {"redis", "qdrant", "embedding", "agents"} <= set(report)
    assert sorted(report["agents"]) == ["mythos", "polaris"]


def test_health_without_keys_configured_stays_the_full_report(make_app: MakeApp) -> None:
    with client_for(make_app()) as client:
        report = client.get("/health").json()
    assert set(report) == {"status", "redis", "qdrant", "embedding", "agents"}


def test_health_says_degraded_to_strangers_too(
    make_app: MakeApp, embeddings: EmbeddingServer
) -> None:
    with client_for(make_app(agents(api_keys=KEYS))) as client:
        embeddings.fail_next(503, times=5)
        assert client.get("/health").json() == {"status": "degraded"}


def test_the_schema_documents_both_health_answers(make_app: MakeApp) -> None:
    with client_for(make_app()) as client:
        schema = client.get("/openapi.json").json()
    answer = schema["paths"]["/health"]["get"]["responses"]["200"]["content"]["application/json"]
    refs = {option["$ref"] for option in answer["schema"]["anyOf"]}
    assert refs == {"#/components/schemas/HealthResponse", "#/components/schemas/HealthStatus"}
    assert schema["components"]["schemas"]["HealthStatus"]["required"] == ["status"]


# --- a wrong key, before the body -------------------------------------------------------------


@pytest.mark.parametrize("path", ["/save", "/retrieve", "/agents/mythos/delete", "/health"])
def test_an_invalid_key_is_401_before_the_body_is_read(make_app: MakeApp, path: str) -> None:
    with served(make_app(agents(api_keys=KEYS))) as address:
        head = (
            f"POST {path} HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\n"
            "Authorization: Bearer not-a-key-0123456789\nContent-Length: 5000000\n"
        )
        sock = raw_request(address, head)  # the body never comes
        try:
            status, _, body = read_response(sock, timeout=3)
        finally:
            sock.close()
    assert status == 401
    assert json.loads(body) == {"error": "unauthorized", "detail": "the API key is not valid"}


def test_a_valid_key_still_reaches_the_agent_check(make_app: MakeApp) -> None:
    with client_for(make_app(agents(api_keys=KEYS))) as client:
        body = {"bot": "polaris", "messages": []}
        assert client.post("/save", json=body, headers=bearer(MYTHOS)).status_code == 403
        assert client.post("/save", json=body, headers=bearer(ALL)).status_code == 202


# --- the Host header (DNS rebinding) -------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("127.0.0.1:{port}", 200),
        ("localhost:{port}", 200),
        ("LOCALHOST", 200),
        ("[::1]:{port}", 200),
        ("evil.example:{port}", 400),
        ("127.0.0.1.evil.example", 400),
    ],
)
def test_a_loopback_server_answers_only_loopback_names(
    make_app: MakeApp, caplog: pytest.LogCaptureFixture, host: str, status: int
) -> None:
    with served(make_app()) as (address, port), caplog.at_level(logging.WARNING):
        response = httpx.get(
            f"http://{address}:{port}/health", headers={"Host": host.format(port=port)}
        )
    assert response.status_code == status, response.text
    if status == 400:
        assert is_error_shape(response.json())
        assert response.json()["error"] == "host_not_allowed"
        assert "MEMORY_POOL_ALLOWED_HOSTS" in response.json()["detail"]
        assert any("refused a request for host" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("allowed", "host", "status"),
    [
        ("memory.example, api", "memory.example:3102", 200),
        ("memory.example, api", "API", 200),
        ("memory.example, api", "127.0.0.1", 400),
        ("*", "anything.example", 200),
    ],
)
def test_allowed_hosts_setting(make_app: MakeApp, allowed: str, host: str, status: int) -> None:
    app = make_app(MEMORY_POOL_ALLOWED_HOSTS=allowed)
    with served(app) as (address, port):
        response = httpx.get(f"http://{address}:{port}/health", headers={"Host": host})
    assert response.status_code == status, response.text


def test_the_test_client_host_is_not_loopback_so_unchecked(make_app: MakeApp) -> None:
    # TestClient says "testserver": no loopback connection, no default check.
    with client_for(make_app()) as client:
        assert client.get("/health").status_code == 200
    with client_for(make_app(MEMORY_POOL_ALLOWED_HOSTS="memory.example")) as client:
        assert client.get("/health").status_code == 400


def test_compose_allows_its_own_service_name_and_loopback() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    api = compose["services"]["api"]
    allowed = {h.strip() for h in api["environment"]["MEMORY_POOL_ALLOWED_HOSTS"].split(",")}
    assert {"api", "localhost", "127.0.0.1"} <= allowed
    # The health check addresses 127.0.0.1 inside the container.
    assert "http://127.0.0.1:3102/health" in " ".join(api["healthcheck"]["test"])

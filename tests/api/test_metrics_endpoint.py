"""/metrics in the API process: the route template as label, the switch, the request id."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from shared.agents import AgentConfig, Agents
from shared.runtime import Runtime
from tests.support.deployment import parse_metrics, value
from tests.support.embedding_server import EmbeddingServer
from tests.support.stack import stack_settings


@pytest.fixture
def runtime(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[Runtime]:
    settings = stack_settings(redis_url, embeddings.url, tmp_path)
    built = Runtime.build(
        settings, agents=Agents([AgentConfig(name="Mythos")], accept_unlisted=True)
    )
    yield built
    built.close()


def save(client: TestClient, bot: str, mid: str) -> None:
    body = {"bot": bot, "messages": [{"message_id": mid, "text": "hello there, friend"}]}
    assert client.post("/save", json=body).status_code == 202


def test_requests_are_labelled_by_route_template_never_by_path(runtime: Runtime) -> None:
    with TestClient(create_app(runtime.settings, runtime=runtime)) as client:
        before = parse_metrics(client.get("/metrics").text)
        assert client.get("/agents/someone-private/stats").status_code == 200
        assert client.get("/no/such/path/user-123").status_code == 404
        text = client.get("/metrics").text
    assert "someone-private" not in text and "user-123" not in text
    after = parse_metrics(text)
    name = "memory_pool_http_requests_total"
    stats = {"endpoint": "/agents/{bot}/stats", "status": "200"}
    assert value(after, name, **stats) - value(before, name, **stats) == 1
    other = {"endpoint": "other", "status": "404"}
    assert value(after, name, **other) - value(before, name, **other) == 1


def test_without_keys_metrics_are_open_and_read_the_backlog(runtime: Runtime) -> None:
    with TestClient(create_app(runtime.settings, runtime=runtime)) as client:
        save(client, "Mythos", "1")
        save(client, "Mythos", "2")
        samples = parse_metrics(client.get("/metrics").text)
    assert value(samples, "memory_pool_backlog_up") == 1
    assert value(samples, "memory_pool_backlog_unwritten_messages", agent="Mythos") == 2
    assert value(samples, "memory_pool_backlog_buffered_messages", agent="Mythos") == 2
    assert value(samples, "memory_pool_backlog_scheduled_conversations") == 1
    assert value(samples, "memory_pool_backlog_quarantined_conversations") == 0


def test_metrics_off_means_no_endpoint_and_no_counting(runtime: Runtime) -> None:
    settings = runtime.settings.model_copy(update={"metrics_enabled": False})
    with TestClient(create_app(settings, runtime=runtime)) as client:
        response = client.post(
            "/save",
            json={"bot": "Mythos", "messages": [{"message_id": "9", "text": "hello there"}]},
            headers={"X-Request-ID": "kept-id"},
        )
        assert response.status_code == 202
        assert response.headers["x-request-id"] == "kept-id"  # logs keep their request id
        missing = client.get("/metrics")
    assert missing.status_code == 404
    assert missing.json()["error"] == "not_found"


def test_a_host_refusal_is_counted_and_carries_a_request_id(runtime: Runtime) -> None:
    settings = runtime.settings.model_copy(update={"allowed_hosts": "memory-pool.example"})
    app = create_app(settings, runtime=runtime)
    with TestClient(app, base_url="http://memory-pool.example") as client:
        before = parse_metrics(client.get("/metrics").text)
        refused = client.get("/health", headers={"Host": "evil.example"})
        after = parse_metrics(client.get("/metrics").text)
    assert refused.status_code == 400 and len(refused.headers["x-request-id"]) == 32
    name = "memory_pool_http_requests_total"
    labels = {"endpoint": "other", "status": "400"}
    assert value(after, name, **labels) - value(before, name, **labels) == 1


def test_unknown_http_methods_share_one_label(runtime: Runtime) -> None:
    with TestClient(create_app(runtime.settings, runtime=runtime)) as client:
        assert client.request("BREW-COFFEE-x1", "/save").status_code == 405
        text = client.get("/metrics").text
    assert "BREW-COFFEE" not in text
    assert value(parse_metrics(text), "memory_pool_http_requests_total", method="other") >= 1

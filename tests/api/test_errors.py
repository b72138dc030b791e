"""Every answer is JSON, errors included: outages are 503s, surprises 500s, never HTML or text."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from shared.agents import AgentConfig, Agents
from shared.runtime import Runtime
from tests.support.embedding_server import EmbeddingServer
from tests.support.redis_server import free_port
from tests.support.stack import stack_settings


@pytest.fixture
def runtime(embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[Runtime]:
    # Nothing listens on this port: Redis is down for every endpoint.
    settings = stack_settings(f"redis://127.0.0.1:{free_port()}/0", embeddings.url, tmp_path)
    built = Runtime.build(
        settings, agents=Agents([AgentConfig(name="mythos")], accept_unlisted=False)
    )
    yield built
    built.close()


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("get", "/agents/mythos/stats", None),
        ("post", "/agents/mythos/flush", None),
        ("post", "/agents/mythos/delete", {"source": "discord"}),
        ("get", "/dead-letters", None),
    ],
)
def test_redis_down_is_a_503_in_the_error_shape(
    runtime: Runtime, method: str, path: str, body: dict | None
) -> None:
    with TestClient(create_app(runtime.settings, runtime=runtime)) as client:
        response = client.request(method, path, json=body)
    assert response.status_code == 503
    assert response.json()["error"] == "upstream_unavailable"
    assert response.json()["detail"].startswith("Redis is unavailable")


def test_an_unexpected_error_is_a_json_500(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object, **__: object) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(runtime.store, "count", broken)
    app = create_app(runtime.settings, runtime=runtime)
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/agents/mythos/stats")
    assert response.status_code == 500
    assert response.json() == {
        "error": "internal_error",
        "detail": "RuntimeError: see the server log",
    }

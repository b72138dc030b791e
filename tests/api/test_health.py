"""/health: dependencies, per-agent collection state and the backlog."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from shared.agents import AgentConfig, AgentDefaults, Agents
from shared.embedding.bm25 import DEFAULT_LEXICAL_WEIGHT
from shared.runtime import Runtime
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


def body(bot: str, mid: str) -> dict:
    return {"bot": bot, "messages": [{"message_id": mid, "text": "hello there, friend"}]}


def test_health_counts_agents_once_whatever_their_spelling(runtime: Runtime) -> None:
    with TestClient(create_app(runtime.settings, runtime=runtime)) as client:
        for bot, mid in [("Nova", "1"), ("nova", "2"), ("mythos", "3")]:
            assert client.post("/save", json=body(bot, mid)).status_code == 202
        report = client.get("/health").json()
    assert report["status"] == "ok"
    # serve's store: "local" (in this process) said nothing of which engine it is
    assert report["qdrant"] == {"ok": True, "local": True, "engine": "embedded"}
    assert report["redis"]["buffered_messages"] == 3
    assert report["redis"]["due_conversations"] == 2
    assert sorted(name.casefold() for name in report["agents"]) == ["mythos", "nova"]
    assert report["agents"]["Mythos"] == {
        "collection": "mem_mythos", "exists": False, "vector_size": None, "points": None,
        "model": None, "model_matches": None, "blocked": None, "quarantined": 0,
        "recall": None, "bm25": None, "points_without_bm25": None,
        "fusion": "dbsf", "lexical_weight": DEFAULT_LEXICAL_WEIGHT,
    }  # fmt: skip
    assert report["embedding"] == {
        "ok": True, "provider": "openai", "model": "text-embedding-3-small", "dimensions": 128,
    }  # fmt: skip


def test_health_shows_each_agents_fusion_and_lexical_weight(
    redis_url: str, embeddings: EmbeddingServer, tmp_path: Path
) -> None:
    settings = stack_settings(redis_url, embeddings.url, tmp_path)
    agents = Agents(
        [AgentConfig(name="Mythos", fusion="rrf", lexical_weight=0.5), AgentConfig(name="Nova")],
        accept_unlisted=True,
        defaults=AgentDefaults(lexical_weight=3.0),
    )
    built = Runtime.build(settings, agents=agents)
    try:
        with TestClient(create_app(settings, runtime=built)) as client:
            assert client.post("/save", json=body("stranger", "1")).status_code == 202
            report = client.get("/health").json()["agents"]
    finally:
        built.close()
    shown = {name: (a["fusion"], a["lexical_weight"]) for name, a in report.items()}
    # a listed agent's own (Nova, listed without the file's defaults, has the built-in ones);
    # an unlisted one made from the defaults
    assert shown == {
        "Mythos": ("rrf", 0.5),
        "Nova": ("dbsf", DEFAULT_LEXICAL_WEIGHT),
        "stranger": ("dbsf", 3.0),
    }


def test_health_says_what_is_down(runtime: Runtime, embeddings: EmbeddingServer) -> None:
    embeddings.fail_next(503, times=5)
    with TestClient(create_app(runtime.settings, runtime=runtime)) as client:
        report = client.get("/health").json()
    assert report["status"] == "degraded"
    assert report["embedding"]["ok"] is False
    assert report["redis"]["ok"] is True and report["qdrant"]["ok"] is True

"""The OpenAPI schema describes every endpoint with its fields and its errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from shared.agents import Agents
from shared.runtime import Runtime
from tests.support.stack import stack_settings

# Each endpoint, and the error statuses its documentation must list.
EDIT_CODES = {"400", "401", "403", "404", "409", "410", "413", "422", "503"}
EXPECTED = {
    ("/save", "post"): {"400", "401", "403", "404", "409", "413", "422", "503"},
    ("/retrieve", "post"): {"400", "401", "403", "404", "422", "503"},
    ("/health", "get"): {"401"},
    ("/agents/{bot}/flush", "post"): {"400", "401", "403", "404", "422"},
    ("/agents/{bot}/stats", "get"): {"400", "401", "403", "404", "422"},
    ("/agents/{bot}/delete", "post"): {"400", "401", "403", "404", "422"},
    ("/agents/{bot}/known-ids", "post"): {"400", "401", "403", "404", "422"},
    ("/dead-letters", "get"): {"401", "403", "422"},
    ("/dead-letters/replay", "post"): {"400", "401", "403", "404", "422"},
    # the memory viewer's API (api/routes/memories.py)
    ("/agents", "get"): {"401"},
    ("/agents/{bot}/memories", "get"): {"400", "401", "403", "404", "422", "503"},
    ("/agents/{bot}/memories/{point_id}", "get"): {"400", "401", "403", "404", "422", "503"},
    ("/agents/{bot}/memories/{point_id}", "delete"): {"400", "401", "403", "404", "422", "503"},
    ("/agents/{bot}/delete/preview", "post"): {"400", "401", "403", "404", "422", "503"},
    ("/agents/{bot}/timeline", "get"): {"400", "401", "403", "404", "422", "503"},
    # edits (api/routes/edits.py)
    ("/agents/{bot}/messages/{message_id}", "patch"): EDIT_CODES,
    # moving a pool (api/routes/pool_transfer.py)
    ("/agents/{bot}/export", "get"): {"400", "401", "403", "404", "409", "422"},
    ("/agents/{bot}/import", "post"): {"400", "401", "403", "404", "409", "413", "422"},
    ("/quarantine", "get"): {"400", "401", "403", "404", "422"},
    ("/quarantine/release", "post"): {"400", "401", "403", "404", "422"},
    ("/quarantine/discard", "post"): {"400", "401", "403", "404", "422"},
    # OpenAI's embeddings API (api/routes/embeddings.py): OpenAI's error shape, no 422
    ("/v1/embeddings", "post"): {"400", "401", "404", "413", "503"},
}
# Qdrant's API for st-qdrant-memory (api/qdrant/): its errors in Qdrant's error shape.
QDRANT_ACCESS = {"400", "401", "403", "404", "422", "503"}
QDRANT = {
    ("/qdrant/collections", "get"): {"401", "503"},
    ("/qdrant/collections/{collection}", "get"): QDRANT_ACCESS,
    ("/qdrant/collections/{collection}", "put"): QDRANT_ACCESS | {"413"},
    ("/qdrant/collections/{collection}", "delete"): QDRANT_ACCESS,
    ("/qdrant/collections/{collection}/points", "put"): QDRANT_ACCESS | {"413"},
    ("/qdrant/collections/{collection}/points/search", "post"): QDRANT_ACCESS | {"413"},
    ("/qdrant/collections/{collection}/points/scroll", "post"): QDRANT_ACCESS | {"413"},
    ("/qdrant/collections/{collection}/points/count", "post"): QDRANT_ACCESS | {"413"},
}


@pytest.fixture(scope="module")
def schema(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    settings = stack_settings(
        "redis://127.0.0.1:1/0", "http://127.0.0.1:1/v1", Path(tmp_path_factory.mktemp("d"))
    )
    runtime = Runtime.build(settings, agents=Agents([], accept_unlisted=True))
    try:
        with TestClient(create_app(settings, runtime=runtime)) as client:
            return client.get("/openapi.json").json()
    finally:
        runtime.close()


def test_every_endpoint_is_described(schema: dict[str, Any]) -> None:
    described = {(path, method) for path, ops in schema["paths"].items() for method in ops}
    assert described == set(EXPECTED) | set(QDRANT)


@pytest.mark.parametrize(("path", "method"), sorted(EXPECTED))
def test_errors_are_documented_with_the_error_shape(
    schema: dict[str, Any], path: str, method: str
) -> None:
    responses = schema["paths"][path][method]["responses"]
    errors = {code for code in responses if code.startswith(("4", "5"))}
    assert errors == EXPECTED[(path, method)]
    shape = "OpenAIErrorResponse" if path.startswith("/v1/") else "ErrorResponse"
    for code in errors - {"422"}:
        ref = responses[code]["content"]["application/json"]["schema"]["$ref"]
        assert ref == f"#/components/schemas/{shape}"
    success = next(code for code in responses if code.startswith("2"))
    content = responses[success]["content"]
    # the export streams JSON Lines; every other success is a JSON object
    assert "application/x-ndjson" in content or content["application/json"]["schema"]


@pytest.mark.parametrize(("path", "method"), sorted(QDRANT))
def test_qdrant_errors_are_documented_with_qdrants_error_shape(
    schema: dict[str, Any], path: str, method: str
) -> None:
    responses = schema["paths"][path][method]["responses"]
    errors = {code for code in responses if code.startswith(("4", "5"))}
    assert errors == QDRANT[(path, method)]
    for code in errors:
        ref = responses[code]["content"]["application/json"]["schema"]["$ref"]
        assert ref == "#/components/schemas/QdrantErrorResponse"
    answer = responses["200"]["content"]["application/json"]["schema"]["$ref"]
    fields = schema["components"]["schemas"][answer.rsplit("/", 1)[1]]["properties"]
    assert set(fields) == {"result", "status", "time"}


def test_the_time_word_fields_of_retrieve_are_described(schema: dict[str, Any]) -> None:
    fields = schema["components"]["schemas"]["RetrieveRequest"]["properties"]
    assert {"time_words", "now"} <= set(fields)
    assert "the agent's `time_words`" in fields["time_words"]["description"]
    assert "the server's clock" in fields["now"]["description"]
    now = next(part for part in fields["now"]["anyOf"] if part.get("type") == "integer")
    assert now["minimum"] == 0


def test_health_and_delete_fields_are_described(schema: dict[str, Any]) -> None:
    components = schema["components"]["schemas"]
    assert set(components["HealthResponse"]["properties"]) == {
        "status", "redis", "qdrant", "embedding", "agents",
    }  # fmt: skip
    agent = components["AgentHealth"]["properties"]
    assert {
        "collection", "exists", "vector_size", "model", "model_matches", "blocked", "quarantined",
    } <= set(agent)  # fmt: skip
    assert {"fusion", "lexical_weight"} <= set(agent)
    scopes = components["DeleteRequest"]["properties"]
    assert set(scopes) == {"source", "channel_id", "conversation_id", "message_id", "user_id"}


def test_the_retrieve_fields_are_described(schema: dict[str, Any]) -> None:
    fields = schema["components"]["schemas"]["RetrieveRequest"]["properties"]
    assert {"recall", "fusion", "lexical_threshold", "lexical_weight"} <= set(fields)
    weight = next(f for f in fields["lexical_weight"]["anyOf"] if f.get("type") == "number")
    assert (weight["minimum"], weight["maximum"]) == (0, 10)

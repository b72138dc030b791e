"""Every error answers {"error", "detail"}: unknown routes, wrong methods, unparsable bodies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.support.door import MakeApp, app_factory, client_for, is_error_shape
from tests.support.embedding_server import EmbeddingServer

JSON = {"content-type": "application/json"}


@pytest.fixture
def client(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[TestClient]:
    make: MakeApp
    with app_factory(redis_url, embeddings.url, tmp_path) as make, client_for(make()) as test:
        yield test


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("get", "/nope", 404, "not_found"),
        ("post", "/agents/mythos", 404, "not_found"),
        ("get", "/save", 405, "method_not_allowed"),
        ("delete", "/retrieve", 405, "method_not_allowed"),
        ("put", "/health", 405, "method_not_allowed"),
    ],
)
def test_routing_errors_have_the_error_shape(
    client: TestClient, method: str, path: str, status: int, code: str
) -> None:
    response = client.request(method, path)
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    assert is_error_shape(response.json()) and response.json()["error"] == code
    if status == 405:
        assert response.headers["allow"]


@pytest.mark.parametrize(
    "body",
    [
        b'{"bot": "mythos", "messages": [{"message_id": "a", "ts": ' + b"1" * 5000 + b"}]}",
        b'{"bot": "myth\xffos", "messages": []}',  # not UTF-8
    ],
    ids=["5000-digit-number", "not-utf-8"],
)
def test_unparsable_bodies_have_the_error_shape(client: TestClient, body: bytes) -> None:
    # Before: {"detail": "There was an error parsing the body"}.
    response = client.post("/save", content=body, headers=JSON)
    assert response.status_code == 400
    assert is_error_shape(response.json())
    assert response.json()["error"] == "invalid_json"


@pytest.mark.parametrize(
    "query",
    ["offset=10000000000000000000", "offset=-1", "limit=0", "limit=1001", "offset=1e3"],
)
def test_dead_letter_paging_out_of_range_is_422(client: TestClient, query: str) -> None:
    # Before: an offset past Redis's 64-bit range answered 503 "Redis is unavailable".
    response = client.get(f"/dead-letters?{query}")
    assert response.status_code == 422, response.text
    assert is_error_shape(response.json())


def test_the_largest_dead_letter_offset_is_an_empty_page(client: TestClient) -> None:
    response = client.get("/dead-letters?offset=1000000000")
    assert response.status_code == 200
    assert response.json() == {"total": 0, "entries": [], "quarantined_total": 0, "quarantined": []}

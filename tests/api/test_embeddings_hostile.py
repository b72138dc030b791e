"""Review of #26 as a careless or hostile caller of POST /v1/embeddings: bodies no OpenAI client
sends are refused in OpenAI's shape with a 4xx, never a 5xx, and nothing under /v1 answers in
another shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support.door import app_factory, client_for, is_openai_error_shape
from tests.support.embedding_server import EmbeddingServer

URL = "/v1/embeddings"
JSON = {"content-type": "application/json"}


@pytest.fixture
def client(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[TestClient]:
    with app_factory(redis_url, embeddings.url, tmp_path) as make, client_for(make()) as test:
        yield test


HOSTILE_BODIES: list[Any] = [
    {"model": "m", "input": [" "]},
    {"model": "m", "input": "\u0000"},
    {"model": "m", "input": ["a"] * 3 + [""]},
    {"model": "m", "input": [["nested"]]},
    {"model": "m", "input": {"a": "b"}},
    {"model": "m", "input": "x", "dimensions": True},
    {"model": "m", "input": "x", "dimensions": 10**30},
    {"model": "m", "input": "x", "dimensions": -1},
    {"model": "m", "input": "x", "dimensions": 1.0},
    {"model": "m", "input": "x", "encoding_format": "BASE64"},
    {"model": "m", "input": "x", "encoding_format": None, "user": {"deep": [1]}},
    {"model": "", "input": "x"},
    {"model": None, "input": "x"},
    {"model": ["m"], "input": "x"},
    {"model": "m" * 100_000, "input": "x"},
    {"input": "x"},
    {"model": "m"},
    {"model": "m", "input": "\ud800 lone"},
    {"model": "m", "input": ["\U0001f600" * 1000]},
]
RAW_BODIES: list[bytes] = [
    b"",
    b"null",
    b"[]",
    b'"text"',
    b"{" * 100_000,
    b'{"model": "m", "input": "x", "dimensions": ' + b"9" * 5000 + b"}",
    b'{"model": "m", "input": "x", "dimensions": 1e999}',
    b'{"model": "m", "input": NaN}',
    b"\xff\xfe{\x00}\x00",
    b'{"model": "m", "input": "x"}' + b" " * 10 + b"trailing",
]


@pytest.mark.parametrize("body", HOSTILE_BODIES, ids=range(len(HOSTILE_BODIES)))
def test_a_hostile_body_is_answered_or_refused_in_openais_shape(
    client: TestClient, body: Any
) -> None:
    """Any JSON body: 200 with one embedding per input, or a 4xx in OpenAI's shape."""
    response = client.post(URL, content=json.dumps(body).encode(), headers=JSON)
    assert response.status_code < 500, response.text[:300]
    if response.status_code == 200:
        data = response.json()["data"]
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        assert len(data) == len(texts)
    else:
        assert is_openai_error_shape(response.json()), response.text[:300]


@pytest.mark.parametrize("raw", RAW_BODIES, ids=range(len(RAW_BODIES)))
def test_bytes_that_are_no_request_are_a_4xx_in_openais_shape(
    client: TestClient, raw: bytes
) -> None:
    response = client.post(URL, content=raw, headers=JSON)
    assert 400 <= response.status_code < 500, response.text[:300]
    assert is_openai_error_shape(response.json()), response.text[:300]


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", URL), ("PUT", URL), ("DELETE", URL), ("POST", "/v1"), ("POST", "/v1/"),
     ("POST", "/v1/chat/completions"), ("POST", "/v1/embeddings/"),
     ("OPTIONS", URL)],
)  # fmt: skip
def test_every_other_call_under_v1_is_a_4xx_in_openais_shape(
    client: TestClient, method: str, path: str
) -> None:
    response = client.request(method, path, content=b"{}", headers=JSON)
    assert 400 <= response.status_code < 500, response.text[:300]
    assert is_openai_error_shape(response.json()), response.text[:300]

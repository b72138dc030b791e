"""The API tests' app: memory-pool's own, on a real Redis and the embedding test server, built
per test from the settings a test gives (`make_app`), and a client of the default one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.support.door import MakeApp, app_factory, client_for
from tests.support.embedding_server import EmbeddingServer


@pytest.fixture
def make_app(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[MakeApp]:
    with app_factory(redis_url, embeddings.url, tmp_path) as make:
        yield make


@pytest.fixture
def client(make_app: MakeApp) -> Iterator[TestClient]:
    with client_for(make_app()) as test_client:
        yield test_client

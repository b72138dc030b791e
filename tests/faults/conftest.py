"""The multi-process harness: real worker and scheduler processes around test servers.

One cluster serves the whole package (starting Celery workers costs seconds on a small machine):
a persistent Redis, a Qdrant test server, an embedding server, `memory-pool worker` and
`memory-pool scheduler` subprocesses, and the API in this process. Each test gets it back whole
(faults cleared, servers up, dead workers replaced) and uses its own agent, so its collection
and Redis keys are its own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from shared.settings import Settings
from tests.support.cluster import EMBEDDING_DIMS, SETTINGS_KEYS, Cluster, subprocess_env
from tests.support.embedding_server import EmbeddingServer
from tests.support.qdrant_server import QdrantTestServer
from tests.support.redis_server import RedisServer


@pytest.fixture(scope="package")
def _cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("faults")
    (root / "redis").mkdir()
    (root / "logs").mkdir()
    redis_server = RedisServer(persistent=True, data_dir=root / "redis")
    qdrant = QdrantTestServer(root / "qdrant")
    embeddings = EmbeddingServer(dims=EMBEDDING_DIMS)
    cluster: Cluster | None = None
    try:
        redis_server.start()
        qdrant.start()
        embeddings.start()
        env = subprocess_env(redis_server.url, qdrant.url, embeddings.url, root / "data")
        settings = Settings(**{k: v for k, v in env.items() if k.startswith(SETTINGS_KEYS)})
        cluster = Cluster(redis_server, qdrant, embeddings, env, settings, root / "logs")
        cluster.ensure_running()
        with TestClient(create_app(settings)) as client:
            cluster.client = client
            yield cluster
    finally:
        if cluster is not None:
            cluster.shutdown()
        embeddings.stop()
        qdrant.stop()
        redis_server.close()


@pytest.fixture
def cluster(_cluster: Cluster) -> Iterator[Cluster]:
    """The package's cluster, whole again and with fresh log marks for this test."""
    if _cluster.redis._process is None:  # a test that crashed Redis and failed before restart
        _cluster.redis.start()
    _cluster.ensure_running()
    _cluster.embeddings.reset_log()
    yield _cluster
    _cluster.embeddings.clear_faults()
    _cluster.qdrant.clear_faults()
    for proc in _cluster.processes():  # pytest shows this only when the test failed
        print(f"--- {proc.name} ---\n{proc.log_since_mark()[-3000:]}")

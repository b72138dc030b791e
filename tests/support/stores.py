"""The two Store implementations as tests open them: "edge" (Qdrant Edge in a temporary folder,
as `memory-pool serve` keeps it) and "server" (qdrant-client over the REST test server)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from qdrant_client import QdrantClient

from shared.store.edge.engine import EdgeStore
from shared.store.interface import Store
from shared.store.qdrant.engine import QdrantStore
from tests.support.qdrant_server import QdrantTestServer

KINDS = ["edge", "server"]


@contextmanager
def open_store(kind: str, folder: Path) -> Iterator[Store]:
    if kind == "edge":
        edge = EdgeStore(folder / "edge")
        try:
            yield edge
        finally:
            edge.close()
        return
    with QdrantTestServer(folder / "qdrant") as server:
        # as Store.open builds it, without the version check's thread, which would outlive a
        # quick test and warn once the server has stopped
        http = QdrantClient(url=server.url, prefer_grpc=False, timeout=5, check_compatibility=False)
        opened = QdrantStore(http, local=False)
        try:
            yield opened
        finally:
            opened.close()

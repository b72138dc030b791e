"""Hybrid recall on a Qdrant older than 1.18, which cannot add the BM25 vector to an existing
collection. Its own module: it runs a stack of its own, and a test process can run only one
stack at a time (tests/support/stack.py), so the hybrid module's stack must be gone first."""

from __future__ import annotations

import time
from pathlib import Path

from tests.support.embedding_server import EmbeddingServer
from tests.support.hybrid_lake import TRIP, lake_agents, retrieve, st_collection
from tests.support.qdrant_server import QdrantTestServer
from tests.support.redis_server import RedisServer
from tests.support.st_memory import BASE_TS, expected_block, message
from tests.support.stack import running_stack, stack_settings


def test_an_older_server_stays_dense_reports_it_and_nothing_fails(
    embedding_server: EmbeddingServer, tmp_path: Path
) -> None:
    """A Qdrant before 1.18 cannot add the BM25 vector to st-qdrant-memory's collection:
    memory-pool writes and recalls it dense only, and /health and stats say so."""
    # A Redis of its own: the session's may hold another module's Celery queue.
    with RedisServer() as redis_server, QdrantTestServer(before_1_18=True) as qdrant:
        settings = stack_settings(
            redis_server.url, embedding_server.url, tmp_path, QDRANT_URL=qdrant.url,
            MEMORY_POOL_BACKFILL_INTERVAL=0.2,
        )  # fmt: skip
        with running_stack(settings, lake_agents()) as stack:
            dims, _ = st_collection(stack, "mem_seraphina")
            body = {"bot": "seraphina", "messages": [
                message("old-1", f"{TRIP} with Bartholomew", BASE_TS),
                message("old-2", "yes, Bartholomew paddled", BASE_TS + 1, self_=True)]}  # fmt: skip
            assert stack.save(body)["accepted"] == 2
            stack.flush("seraphina")
            time.sleep(0.5)  # a few backfill rounds: they find nothing they may do
            stats = stack.client.get("/agents/seraphina/stats").json()
            assert (stats["points"], stats["bm25"], stats["recall"]) == (42, False, "dense")
            assert stats["points_without_bm25"] == 42
            health = stack.client.get("/health").json()
            assert health["status"] == "ok"
            agent = health["agents"]["seraphina"]
            assert (agent["bm25"], agent["recall"], agent["vector_size"]) == (False, "dense", dims)
            answer = retrieve(stack, bot="seraphina", query_text=f"Bartholomew and {TRIP}")
            assert len(answer["hits"]) == 5
            assert all(hit["fused_score"] is None for hit in answer["hits"])
            assert answer["formatted"] == expected_block(answer["hits"], "User")

"""`memory-pool serve` answers one scrape for everything: API, its worker, its scheduler."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.deployment import parse_metrics, value
from tests.support.embedding_server import EmbeddingServer
from tests.support.serve import FLUSHED, FLUSHED_QUERY, serve_env, serving


def test_serve_metrics_are_one_scrape_and_its_logs_json(
    tmp_path: Path, embeddings: EmbeddingServer
) -> None:
    env = serve_env(embeddings) | {"MEMORY_POOL_LOG_FORMAT": "json"}
    log = tmp_path / "serve.log"
    with serving(tmp_path / "data", env, log) as served:
        assert served.post("/save", FLUSHED)["accepted"] == 1
        assert served.flush()["done"]
        assert served.retrieve(FLUSHED_QUERY)["hits"]
        samples = parse_metrics(served.http.get("/metrics").text)
        assert served.interrupt() == 0, served.log_tail()
    assert value(samples, "memory_pool_save_messages_total", outcome="accepted") == 1
    assert value(samples, "memory_pool_flush_chunks_written_total") == 1
    assert value(samples, "memory_pool_flush_tasks_total", outcome="ok") >= 1
    assert value(samples, "memory_pool_embedding_request_duration_seconds_count") >= 2
    assert value(samples, "memory_pool_qdrant_request_duration_seconds_count", operation="query")
    assert value(samples, "memory_pool_scheduler_claimed_conversations_total") >= 1
    assert value(samples, "memory_pool_retrieve_duration_seconds_count", outcome="hits") == 1
    assert value(samples, "memory_pool_backlog_up") == 1
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    loggers = {line["logger"] for line in lines}
    assert {"memory_pool.serve", "uvicorn.access", "celery.app.trace"} <= loggers, loggers
    assert all(line.get("request_id") for line in lines if line["logger"] == "uvicorn.access")

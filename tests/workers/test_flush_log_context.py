"""A flush's lines about one conversation carry it as context fields (issue 16: "context fields
(agent, conversation, task id, request id)"), so JSON logs can be filtered by conversation."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from shared.errors import UpstreamUnavailable
from shared.ops.log_setup import JsonFormatter
from shared.state import keys
from tests.support.embedding_server import EmbeddingServer
from tests.support.flush_world import HALF, World, make_world, message, settings, world
from workers.flush import flush

__all__ = ["make_world", "settings", "world"]  # fixtures, used by name


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logging.getLogger().addHandler(handler)
    yield stream
    logging.getLogger().removeHandler(handler)


def test_a_retried_conversation_is_named_in_its_lines_context(
    world: World, embeddings: EmbeddingServer, json_log: io.StringIO
) -> None:
    # Fails on main 2987668: no line ever had a conversation field (nothing set it), nor an
    # agent one outside a request.
    world.runtime.embedder.dimensions()
    convs = {
        world.save("mythos", f"c{c}", [message(f"c{c}-{i}", f"{HALF} {i}", i) for i in range(3)])
        for c in range(2)
    }
    embeddings.fail_next(429, retry_after=2)
    assert flush(world.claim_all(), world.deps).retried == 2
    lines = [json.loads(line) for line in json_log.getvalue().splitlines()]
    waits = [
        line for line in lines if line["logger"] == "workers.flush" and "waits" in line["message"]
    ]
    assert {line.get("conversation") for line in waits} == convs
    assert {line.get("agent") for line in waits} == {"mythos"}


def test_a_take_back_that_waits_for_qdrant_is_counted_as_a_retry(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The conversation is given back to retry (Qdrant cannot delete the dead flush's points),
    # so the report, and memory_pool_flush_retries_total{cause}, must count it. Fails on main
    # 2987668: retried 0, so the retry was invisible in the metrics.
    conv = world.save(
        "mythos", "c1", [message("X", "hello harbour", 1), message("Y", "y" * 480, 2)]
    )
    real = world.runtime.store.upsert

    def upsert_then_die(name: str, points: Sequence[Any]) -> None:
        real(name, points)
        raise KeyboardInterrupt  # dies before its commit: its points are in flight

    monkeypatch.setattr(world.runtime.store, "upsert", upsert_then_die)
    with pytest.raises(KeyboardInterrupt):
        flush(world.claim_all(), world.deps)
    monkeypatch.setattr(world.runtime.store, "upsert", real)
    world.redis.delete(keys.lease(conv))  # the dead worker's lease expires

    def qdrant_down(*_: object) -> None:
        raise UpstreamUnavailable("Qdrant is unavailable")

    monkeypatch.setattr(world.runtime.store, "delete_points", qdrant_down)
    report = flush(world.claim_all(), world.deps)
    assert report.retried == 1 and report.chunks_written == 0
    assert "inflight" in world.meta(conv)  # still to take back, later

"""A flush's lines about one conversation carry it as context fields (issue 16: "context fields
(agent, conversation, task id, request id)"), so JSON logs can be filtered by conversation."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from shared.log_setup import JsonFormatter
from tests.support.embedding_server import EmbeddingServer
from tests.workers.test_flush import HALF, World, make_world, message, settings, world
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

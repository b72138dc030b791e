"""Review of the metrics work (issue 16): a scrape against a Redis that no longer answers, and
the request id of an answer no route expected (a 500)."""

from __future__ import annotations

import io
import json
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from shared.agents import AgentConfig, Agents
from shared.ops.log_setup import JsonFormatter
from shared.runtime import Runtime, redis_client
from tests.support.deployment import parse_metrics, value
from tests.support.embedding_server import EmbeddingServer
from tests.support.stack import stack_settings


@pytest.fixture
def runtime(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[Runtime]:
    settings = stack_settings(redis_url, embeddings.url, tmp_path)
    built = Runtime.build(
        settings, agents=Agents([AgentConfig(name="Mythos")], accept_unlisted=True)
    )
    yield built
    built.close()


@pytest.fixture
def hung_redis() -> Iterator[str]:
    """A Redis that accepts connections and never answers (stopped, or a network partition)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    yield f"redis://127.0.0.1:{sock.getsockname()[1]}/0"
    sock.close()


def test_a_scrape_says_the_backlog_is_unreadable_in_time_when_redis_hangs(
    runtime: Runtime, hung_redis: str
) -> None:
    # The process's client as the API builds it, on a Redis that hangs: the scrape must answer
    # (backlog_up 0) within Prometheus' scrape_timeout (10 s), or every API metric is lost.
    # Holds on main 2987668 (5.0 s: one socket timeout; a SIGSTOPped Redis gives the same).
    runtime.redis = redis_client(runtime.settings.model_copy(update={"redis_url": hung_redis}))
    with TestClient(create_app(runtime.settings, runtime=runtime)) as client:
        started = time.perf_counter()
        response = client.get("/metrics")
        took = time.perf_counter() - started
    assert response.status_code == 200
    assert value(parse_metrics(response.text), "memory_pool_backlog_up") == 0
    assert took < 8, f"the scrape took {took:.1f} s"


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    yield stream
    root.removeHandler(handler)


def test_an_unexpected_error_answer_and_its_log_line_carry_the_request_id(
    runtime: Runtime, json_log: io.StringIO
) -> None:
    # A 500 is answered by Starlette's outermost ServerErrorMiddleware, outside RequestId: on
    # main 2987668 it had no X-Request-ID, and its ERROR line (the traceback) no request_id.
    app = create_app(runtime.settings, runtime=runtime)

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("an unforeseen bug")

    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/boom", headers={"X-Request-ID": "rid-500"})
        samples = parse_metrics(client.get("/metrics").text)
    assert response.status_code == 500
    assert response.json()["error"] == "internal_error"
    assert response.headers.get("x-request-id") == "rid-500"
    lines = [json.loads(line) for line in json_log.getvalue().splitlines() if line]
    errors = [line for line in lines if line["level"] == "ERROR"]
    assert len(errors) == 1, errors
    assert errors[0]["request_id"] == "rid-500" and "an unforeseen bug" in errors[0]["exception"]
    assert value(samples, "memory_pool_http_requests_total", endpoint="/boom", status="500") == 1


def test_a_json_line_stays_one_line_whatever_agent_name_it_carries(
    runtime: Runtime, json_log: io.StringIO
) -> None:
    # Any agent name is accepted without an agents file, and the agent is a context field of
    # the request's lines. U+2028/U+2029 (and U+0085) are line breaks to str.splitlines() and to
    # many log viewers; json.dumps(ensure_ascii=False) wrote them raw, so a hostile name could
    # end a line early and start a forged one. Fails on main 2987668.
    forged = '{"level": "CRITICAL", "logger": "forged", "message": "forged", "x": "'
    bot = f"Mythos\u2029\u2028{forged}"
    body = {"bot": bot, "messages": [{"message_id": "a,b", "text": "hello there, friend"}]}
    with TestClient(create_app(runtime.settings, runtime=runtime)) as client:
        assert client.post("/save", json=body).status_code == 202  # refused one: a warning
    text = json_log.getvalue()
    lines = [json.loads(line) for line in text.splitlines() if line]
    assert not any(line["logger"] == "forged" for line in lines)
    warning = next(line for line in lines if line["logger"] == "api.routes.save")
    assert warning["agent"] == bot  # escaped, not lost

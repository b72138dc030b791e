"""Limits that hold under load: query length, embeddings at once, the body while it streams."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import redis

from tests.support.door import (
    MakeApp,
    client_for,
    is_error_shape,
    message,
    raw_request,
    read_response,
    served,
    snapshot,
)
from tests.support.embedding_server import EmbeddingServer

HUGE_QUERY = "where is the lighthouse keeper? " * 35_000  # 1.1 MB


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


def recall(url: str, text: str, timeout: float = 10.0) -> httpx.Response:
    body = {"bot": "mythos", "query_text": text}
    return httpx.post(f"{url}/retrieve", json=body, timeout=timeout)


# --- query_text ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("length", "status"), [(100, 200), (101, 422)])
def test_query_text_is_capped(make_app: MakeApp, length: int, status: int) -> None:
    with client_for(make_app(MEMORY_POOL_MAX_QUERY_CHARS=100)) as client:
        response = client.post("/retrieve", json={"bot": "mythos", "query_text": "q" * length})
    assert response.status_code == status, response.text
    if status == 422:
        assert response.json()["error"] == "invalid_request"
        assert response.json()["detail"].startswith("query_text: String should have at most 100")


def test_huge_queries_starve_no_one(make_app: MakeApp, embeddings: EmbeddingServer) -> None:
    # Observed: 4 concurrent 1.1 MB queries answered 503 after 3 s but kept embedding for
    # ~22 s; meanwhile /health took 5.8-13.4 s and a small unrelated recall answered 503.
    with served(make_app()) as (host, port):
        url = f"http://{host}:{port}"
        with ThreadPoolExecutor(4) as pool:
            started = time.monotonic()
            huge = [pool.submit(recall, url, HUGE_QUERY) for _ in range(4)]
            small = recall(url, "the lighthouse")
            health = httpx.get(f"{url}/health", timeout=10)
            statuses = [future.result().status_code for future in huge]
            elapsed = time.monotonic() - started
    assert statuses == [422] * 4
    assert small.status_code == 200 and health.status_code == 200
    assert elapsed < 3.0


# --- query embeddings at once -----------------------------------------------------------------


def test_recall_fails_fast_when_every_embedding_slot_is_busy(
    make_app: MakeApp, embeddings: EmbeddingServer
) -> None:
    app = make_app(MEMORY_POOL_RECALL_CONCURRENCY=1, MEMORY_POOL_RECALL_QUEUE_SECONDS=0.2)
    with client_for(app) as client:
        assert client.post("/retrieve", json={"bot": "mythos", "query_text": "warm"}).is_success
        embeddings.hang_next(2.0)
        slow: dict[str, Any] = {}

        def ask_slowly() -> None:
            slow["response"] = client.post(
                "/retrieve", json={"bot": "mythos", "query_text": "slow question"}
            )

        thread = threading.Thread(target=ask_slowly)
        thread.start()
        time.sleep(0.5)  # the slow one holds the only slot
        started = time.monotonic()
        busy = client.post("/retrieve", json={"bot": "mythos", "query_text": "other question"})
        busy_seconds = time.monotonic() - started
        cached = client.post("/retrieve", json={"bot": "mythos", "query_text": "warm"})
        thread.join(timeout=10)
        after = client.post("/retrieve", json={"bot": "mythos", "query_text": "other question"})
    assert busy.status_code == 503, busy.text
    assert busy.json()["error"] == "recall_busy"
    assert busy_seconds < 1.0
    assert cached.status_code == 200  # a cached query needs no slot
    assert slow["response"].status_code == 200
    assert after.status_code == 200  # the slot came back


# --- the body, while it streams -----------------------------------------------------------------


def test_a_body_over_the_limit_is_413_in_the_error_shape(make_app: MakeApp, r: redis.Redis) -> None:
    with client_for(make_app(MEMORY_POOL_MAX_BODY_BYTES=2048)) as client:
        before = snapshot(r)
        items = [message(f"m{n}", "x" * 100) for n in range(30)]
        response = client.post("/save", json={"bot": "mythos", "messages": items})
        assert response.status_code == 413, response.text
        assert is_error_shape(response.json()) and response.json()["error"] == "request_too_large"
        assert "2048 bytes" in response.json()["detail"]
        assert snapshot(r) == before
        small = client.post("/save", json={"bot": "mythos", "messages": items[:5]})
        assert small.status_code == 202


def test_a_declared_length_over_the_limit_is_refused_before_any_body(make_app: MakeApp) -> None:
    with served(make_app()) as address:
        head = (
            "POST /save HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\n"
            "Content-Length: 100000000\n"
        )
        sock = raw_request(address, head)  # not one byte of the 100 MB
        try:
            status, headers, body = read_response(sock, timeout=3)
        finally:
            sock.close()
    assert status == 413
    assert json.loads(body)["error"] == "request_too_large"
    assert headers.get("connection") == "close"


def test_a_chunked_body_is_cut_off_while_it_streams(make_app: MakeApp, r: redis.Redis) -> None:
    # Observed: a 100 MB chunked body was read whole before its 413 (and RSS stayed 200 MB up).
    with served(make_app(MEMORY_POOL_MAX_BODY_BYTES=64 * 1024)) as address:
        before = snapshot(r)
        head = (
            "POST /save HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\n"
            "Transfer-Encoding: chunked\n"
        )
        chunk = b'{"bot": "mythos", "messages": [' + b" " * 40_000
        sock = raw_request(address, head, b"%x\r\n%s\r\n" % (len(chunk), chunk))
        try:
            for _ in range(2):  # past the limit, then the sender stalls: nothing more comes
                sock.sendall(b"%x\r\n%s\r\n" % (40_000, b" " * 40_000))
            status, _, body = read_response(sock, timeout=3)
        finally:
            sock.close()
        assert status == 413
        assert json.loads(body)["error"] == "request_too_large"
        assert snapshot(r) == before

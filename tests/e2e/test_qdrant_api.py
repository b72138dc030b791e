"""SillyTavern on the same pool: /qdrant answers st-qdrant-memory's Qdrant calls on both stores,
by memory-pool's rules (collections are agents', keys, limits, collection setup), and what it
writes is recalled by /retrieve like every other point (README "SillyTavern on the same pool")."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.app import create_app
from api.qdrant import term_pool
from memory_pool.http_server import HTTP_GRACE_SECONDS, HttpServer
from shared.agents import AgentConfig, Agents, ApiKey
from shared.store.bm25_terms import lacking_terms
from shared.store.interface import PAYLOAD_INDEXES
from tests.support.embedding_server import EmbeddingServer, embed_text
from tests.support.hybrid_lake import retrieve
from tests.support.redis_server import free_port
from tests.support.st_memory import BASE_TS, message, st_chunk
from tests.support.stack import Stack
from tests.support.store_stacks import stack_on
from tests.support.stores import KINDS

ST = "mem_seraphina"  # st-qdrant-memory's collection for the character Seraphina
ST_KEY = "st-key-0123456789abcdef"  # the key SillyTavern is given: Seraphina's only
ADMIN_KEY = "admin-key-0123456789abcdef"
MAX_BODY = 64 * 1024
MAX_POINTS = 20
MAX_CHARS = 20_000  # of text to term in one request, as /save's MEMORY_POOL_MAX_CHARS
LIGHTHOUSE = "[2024-06-10]\nAlex: Bartholomew rowed to the lighthouse\nSeraphina: in the fog"
GARDEN = "[2024-06-11]\nAlex: the garden needs water\nSeraphina: I will fetch the can"


def pool_agents() -> Agents:
    return Agents(
        [AgentConfig(name="seraphina", self_speaker="Seraphina"),
         AgentConfig(name="mythos", self_speaker="Mythos")],
        accept_unlisted=False,
        api_keys=[ApiKey(name="sillytavern", key=ST_KEY, agents=("seraphina",)),
                  ApiKey(name="admin", key=ADMIN_KEY)],
    )  # fmt: skip


@pytest.fixture(params=KINDS)
def stack(
    request: pytest.FixtureRequest, redis_url: str, embeddings: EmbeddingServer, tmp_path: Path
) -> Iterator[Stack]:
    limits = {
        "MEMORY_POOL_MAX_BODY_BYTES": MAX_BODY,
        "MEMORY_POOL_MAX_MESSAGES": MAX_POINTS,
        "MEMORY_POOL_MAX_CHARS": MAX_CHARS,
    }
    with stack_on(
        request.param, redis_url, embeddings.url, tmp_path, pool_agents(), **limits
    ) as running:
        yield running


def call(stack: Stack, method: str, path: str, body: Any = None, key: str = ST_KEY) -> Any:
    """A call as st-qdrant-memory makes it: its `api-key` header, JSON both ways."""
    headers = {"api-key": key} if key else {}
    return stack.client.request(method, f"/qdrant{path}", json=body, headers=headers)


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "ok" and isinstance(body["time"], float), body
    return body["result"]


def refused(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"status", "time"} and set(body["status"]) == {"error"}, body
    return str(body["status"]["error"])


def dims(stack: Stack) -> int:
    return stack.runtime.embedder.dimensions()


def create(stack: Stack, name: str = ST) -> None:
    body = {"vectors": {"size": dims(stack), "distance": "Cosine"}}
    assert ok(call(stack, "PUT", f"/collections/{name}", body)) is True


def st_point(text: str, ids: list[str], stack: Stack, **extra: Any) -> dict[str, Any]:
    payload = {"text": text, **st_chunk(ids, BASE_TS), **extra}
    return {"id": str(uuid.uuid4()), "vector": embed_text(text, dims(stack)), "payload": payload}


def upsert(stack: Stack, *points: dict[str, Any], name: str = ST) -> None:
    result = ok(call(stack, "PUT", f"/collections/{name}/points?wait=true", {"points": points}))
    assert result["status"] == "completed"


def search(stack: Stack, text: str, **body: Any) -> list[dict[str, Any]]:
    request = {"vector": embed_text(text, dims(stack)), "limit": 10, "with_payload": True, **body}
    return list(ok(call(stack, "POST", f"/collections/{ST}/points/search", request)))


def holds(stack: Stack, *ids: str) -> bool:
    """st-qdrant-memory's chunkExists: does any point hold one of these message ids?"""
    body = {"filter": {"should": [{"key": "messageIds", "match": {"text": i}} for i in ids]},
            "limit": 1, "with_payload": False}  # fmt: skip
    return bool(ok(call(stack, "POST", f"/collections/{ST}/points/scroll", body))["points"])


def discord_chunk(stack: Stack, text: str) -> None:
    """The Discord plugin saves to Seraphina; the chunk is flushed (it has a `source`)."""
    messages = [message(f"d{n}", f"{text} ({n})", BASE_TS + n * 1000, channel="c1")
                for n in range(2)]  # fmt: skip
    response = stack.client.post("/save", json={"bot": "seraphina", "messages": messages})
    assert response.status_code == 202, response.text
    stack.flush("seraphina")


def test_a_collection_is_created_as_memory_pool_creates_its_own(stack: Stack) -> None:
    missing = refused(call(stack, "GET", f"/collections/{ST}"), 404)
    assert missing == f"Not found: Collection `{ST}` doesn't exist!"
    create(stack)
    info = ok(call(stack, "GET", f"/collections/{ST}"))
    assert info["config"]["params"]["vectors"] == {"size": dims(stack), "distance": "Cosine"}
    assert info["points_count"] == 0
    state = stack.runtime.store.collection(ST)
    assert state is not None and state.model == stack.runtime.embedder.model
    assert set(PAYLOAD_INDEXES) <= state.indexed_fields and state.has_bm25
    again = call(
        stack, "PUT", f"/collections/{ST}", {"vectors": info["config"]["params"]["vectors"]}
    )
    assert refused(again, 409) == f"Wrong input: Collection `{ST}` already exists!"
    listed = ok(call(stack, "GET", "/collections"))["collections"]
    assert listed == [{"name": ST}]


def test_a_collection_of_another_size_or_distance_or_agent_is_refused(stack: Stack) -> None:
    other = {"vectors": {"size": dims(stack) + 1, "distance": "Cosine"}}
    assert "dimensions" in refused(call(stack, "PUT", f"/collections/{ST}", other), 400)
    dot = {"vectors": {"size": dims(stack), "distance": "Dot"}}
    assert "Cosine" in refused(call(stack, "PUT", f"/collections/{ST}", dot), 400)
    # no agent "stranger" in the agents file (unlisted agents refused); the admin key
    # reaches everything there is
    body = {"vectors": {"size": dims(stack), "distance": "Cosine"}}
    refused(call(stack, "PUT", "/collections/mem_stranger", body, key=ADMIN_KEY), 404)
    refused(call(stack, "PUT", "/collections/Seraphina", body, key=ADMIN_KEY), 404)
    assert stack.runtime.store.collection_names() == []


def test_points_are_written_searched_scrolled_and_counted_as_in_qdrant(stack: Stack) -> None:
    create(stack)
    lighthouse = st_point(LIGHTHOUSE, ["Seraphina_1_1", "Seraphina_1_2"], stack, character="S")
    garden = st_point(GARDEN, ["Seraphina_1_10", "Seraphina_1_11"], stack, character="T")
    upsert(stack, lighthouse, garden)
    hits = search(stack, LIGHTHOUSE, score_threshold=0.3)
    assert hits[0]["id"] == lighthouse["id"] and hits[0]["payload"] == lighthouse["payload"]
    assert hits[0]["score"] == pytest.approx(1.0, abs=1e-3)
    only = search(stack, GARDEN, filter={"must": [{"key": "character", "match": {"value": "S"}}]})
    assert [hit["id"] for hit in only] == [lighthouse["id"]]
    assert "payload" not in search(stack, GARDEN, with_payload=False)[0]
    # st-qdrant-memory's dedupe: an id is one of the comma-separated ids, not a substring
    assert holds(stack, "Seraphina_1_2") and holds(stack, "nope", "Seraphina_1_11")
    assert not holds(stack, "Seraphina_1_0") and not holds(stack, "Seraphina_1")
    count = f"/collections/{ST}/points/count"
    assert ok(call(stack, "POST", count, {}))["count"] == 2
    by_text = {
        "filter": {
            "should": [
                {"key": "messageIds", "match": {"text": "Seraphina_1_1"}},
                {"key": "messageIds", "match": {"text": "Seraphina_1_11"}},
            ]
        }
    }
    assert ok(call(stack, "POST", count, by_text))["count"] == 2  # fmt: skip
    not_s = {"filter": {"must_not": [{"key": "character", "match": {"value": "S"}}]}}
    assert ok(call(stack, "POST", count, not_s))["count"] == 1
    page = ok(call(stack, "POST", f"/collections/{ST}/points/scroll", {"limit": 1}))
    following = ok(call(stack, "POST", f"/collections/{ST}/points/scroll",
                        {"limit": 1, "offset": page["next_page_offset"]}))  # fmt: skip
    assert {page["points"][0]["id"], following["points"][0]["id"]} == {
        lighthouse["id"],
        garden["id"],
    }
    assert following["next_page_offset"] is None


def test_a_vector_of_another_size_is_refused_and_nothing_written(stack: Stack) -> None:
    create(stack)
    good = st_point(LIGHTHOUSE, ["a"], stack)
    short = {**st_point(GARDEN, ["b"], stack), "vector": [0.5, 0.5, 0.5]}
    put = call(stack, "PUT", f"/collections/{ST}/points", {"points": [good, short]})
    assert (
        refused(put, 400)
        == f"Wrong input: Vector dimension error: expected dim: {dims(stack)}, got 3"
    )
    assert stack.runtime.store.count(ST) == 0
    query = {"vector": [1.0, 0.0], "limit": 3}
    assert "Vector dimension error" in refused(
        call(stack, "POST", f"/collections/{ST}/points/search", query), 400
    )
    missing = call(
        stack, "PUT", "/collections/mem_mythos/points", {"points": [good]}, key=ADMIN_KEY
    )
    assert refused(missing, 404) == "Not found: Collection `mem_mythos` doesn't exist!"


def test_other_paths_and_too_much_are_refused_in_qdrant_shape(stack: Stack) -> None:
    create(stack)
    for method, path in [("GET", ""), ("GET", "/"), ("POST", f"/collections/{ST}/points/query"),
                         ("PATCH", f"/collections/{ST}"), ("GET", "/cluster")]:  # fmt: skip
        assert "Not found" in refused(call(stack, method, path), 404)
    many = [st_point(f"{GARDEN} {n}", [f"m{n}"], stack) for n in range(MAX_POINTS + 1)]
    put = call(stack, "PUT", f"/collections/{ST}/points", {"points": many})
    assert "MEMORY_POOL_MAX_MESSAGES" in refused(put, 413)
    huge = [{**st_point("x" * 40_000, ["h"], stack)}, {**st_point("y" * 40_000, ["i"], stack)}]
    put = call(stack, "PUT", f"/collections/{ST}/points", {"points": huge})
    assert "MEMORY_POOL_MAX_BODY_BYTES" in refused(put, 413)
    # More text to term than /save takes in one request: BM25 terms are made in the API's
    # process, so their cost is bounded as /save's messages are (Chinese cuts cost the most).
    long = [st_point("猫" * 7_000 + f" {n}", [f"l{n}"], stack) for n in range(3)]
    put = call(stack, "PUT", f"/collections/{ST}/points", {"points": long})
    assert "MEMORY_POOL_MAX_CHARS" in refused(put, 413)
    assert stack.runtime.store.count(ST) == 0
    bad = {"vector": [0.1] * dims(stack), "limit": 0}
    assert "Validation error" in refused(
        call(stack, "POST", f"/collections/{ST}/points/search", bad), 422
    )
    odd = {"filter": {"must": [{"key": "a.b", "match": {"value": 1}}]}}
    assert "Format error" in refused(
        call(stack, "POST", f"/collections/{ST}/points/count", odd), 400
    )


def test_a_key_reaches_only_its_agents_collection(stack: Stack) -> None:
    create(stack)
    body = {"vectors": {"size": dims(stack), "distance": "Cosine"}}
    assert ok(call(stack, "PUT", "/collections/mem_mythos", body, key=ADMIN_KEY)) is True
    refused(call(stack, "GET", "/collections/mem_mythos"), 403)
    refused(call(stack, "PUT", "/collections/mem_mythos/points", {"points": []}), 403)
    refused(call(stack, "GET", f"/collections/{ST}", key="not-a-key-at-all-xx"), 401)
    refused(call(stack, "GET", "/collections", key="not-a-key-at-all-xx"), 401)
    assert ok(call(stack, "GET", "/collections"))["collections"] == [{"name": ST}]
    everything = ok(call(stack, "GET", "/collections", key=ADMIN_KEY))["collections"]
    assert everything == [{"name": "mem_mythos"}, {"name": ST}]
    # agents that ask no key stay open without one, as on every other endpoint
    assert len(ok(call(stack, "GET", "/collections", key=""))["collections"]) == 2


def test_delete_all_removes_only_st_points_and_keeps_the_collection(stack: Stack) -> None:
    discord_chunk(stack, "the Discord plugin remembers the harbour whales singing")
    mine = st_point(LIGHTHOUSE, ["st-1"], stack)
    upsert(stack, mine)
    assert stack.runtime.store.count(ST) == 2
    assert ok(call(stack, "DELETE", f"/collections/{ST}")) is True
    [kept] = stack.payloads(ST)
    assert kept["source"] == "discord" and "whales" in kept["text"]
    assert ok(call(stack, "GET", f"/collections/{ST}"))["points_count"] == 1
    assert ok(call(stack, "DELETE", "/collections/mem_mythos", key=ADMIN_KEY)) is False


def test_what_st_writes_is_recalled_with_bm25_and_st_finds_discord_chunks(stack: Stack) -> None:
    discord_chunk(stack, "the Discord plugin remembers the harbour whales singing")
    upsert(stack, st_point(LIGHTHOUSE, ["st-1", "st-2"], stack))
    assert lacking_terms(stack.runtime.store, ST) == 0  # terms written with the points
    # the lexical leg alone: no cosine reaches 0.99
    lexical = retrieve(stack, bot="seraphina", query_text="Bartholomew", score_threshold=0.99,
                       lexical_threshold=0.01)  # fmt: skip
    assert [hit["payload"]["text"] for hit in lexical["hits"]] == [LIGHTHOUSE]
    hits = search(stack, "do you remember the harbour whales singing?", score_threshold=0.3)
    assert hits and hits[0]["payload"]["source"] == "discord"
    assert "whales" in hits[0]["payload"]["text"]


def test_a_large_upsert_is_termed_in_a_child_and_its_loss_is_a_503(stack: Stack) -> None:
    """Over IN_PROCESS_CHARS of text the terms are made in the term process (the API's GIL is
    left to the other agents' recalls); a process that cannot be had refuses in Qdrant's shape."""
    create(stack)
    filler = " ".join(["the garden needs water"] * (term_pool.IN_PROCESS_CHARS // 20))
    upsert(stack, st_point(f"{LIGHTHOUSE}\n{filler}", ["big-1"], stack))
    assert stack.client.app.state.term_pool.started  # type: ignore[attr-defined]
    assert lacking_terms(stack.runtime.store, ST) == 0
    lexical = retrieve(stack, bot="seraphina", query_text="Bartholomew", score_threshold=0.99,
                       lexical_threshold=0.01)  # fmt: skip
    assert [hit["payload"]["messageIds"] for hit in lexical["hits"]] == ["big-1"]
    stack.client.app.state.term_pool.close()  # type: ignore[attr-defined]
    put = call(stack, "PUT", f"/collections/{ST}/points", {"points": [
        st_point(f"{GARDEN}\n{filler}", ["big-2"], stack)]})  # fmt: skip
    assert "Service unavailable" in refused(put, 503)
    assert stack.runtime.store.count(ST) == 1
    upsert(stack, st_point(GARDEN, ["small"], stack))  # a usual upsert is termed in process
    assert stack.runtime.store.count(ST) == 2


def test_a_stop_ends_an_upsert_stuck_in_a_hung_term_process_within_the_grace(
    stack: Stack,
) -> None:
    """The HTTP server of `memory-pool api` and `serve` (memory_pool/http_server.py) ends the
    term process when a stop is asked for: the stop is not held for the upsert's own deadline
    (up to 280 s) nor cut at the grace with a 500; the upsert is a 503, nothing written."""
    app = create_app(stack.settings, runtime=stack.runtime)
    server = HttpServer(app, "127.0.0.1", free_port())
    serving = threading.Thread(target=server.run, daemon=True)
    serving.start()
    while not server.started:
        time.sleep(0.02)
    base = f"http://127.0.0.1:{server.config.port}/qdrant/collections/{ST}"
    filler = " ".join(["the garden needs water"] * (term_pool.IN_PROCESS_CHARS // 20))
    with httpx.Client(headers={"api-key": ST_KEY}, timeout=120) as client:
        body = {"vectors": {"size": dims(stack), "distance": "Cosine"}}
        assert client.put(base, json=body).status_code == 200

        def put(ids: list[str]) -> httpx.Response:
            points = [st_point(f"{LIGHTHOUSE}\n{filler}", ids, stack)]
            return client.put(f"{base}/points?wait=true", json={"points": points})

        assert put(["big-1"]).status_code == 200  # the term process is up
        (child,) = list(app.state.term_pool._current()._processes)
        os.kill(child, signal.SIGSTOP)  # hung: swapping, stopped, a pathological text
        answers: list[httpx.Response] = []
        stuck = threading.Thread(target=lambda: answers.append(put(["big-2"])), daemon=True)
        stuck.start()
        time.sleep(1.0)
        started = time.monotonic()
        server.should_exit = True
        serving.join(60)
        stuck.join(10)
    assert time.monotonic() - started < HTTP_GRACE_SECONDS + 8
    assert not serving.is_alive()
    assert [answer.status_code for answer in answers] == [503]
    assert stack.runtime.store.count(ST) == 1

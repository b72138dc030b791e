"""Hybrid recall end to end, on Qdrant Edge (serve's embedded engine) and on the Qdrant REST
test server: a real worker writes both vectors, the scheduler's backfill gives
st-qdrant-memory's points BM25 terms, and /retrieve fuses the legs under today's rules."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from shared.store.edge.engine import EdgeStore
from shared.store.qdrant.engine import QdrantStore
from tests.support.embedding_server import EmbeddingServer, embed_text
from tests.support.hybrid_lake import (
    NAME,
    QUESTION,
    TRIP,
    lake_agents,
    retrieve,
    save_lake_chunks,
    st_collection,
    st_requests,
)
from tests.support.redis_server import RedisServer
from tests.support.st_memory import BASE_TS, expected_block, st_chunk
from tests.support.stack import Stack
from tests.support.store_stacks import fresh_services, stack_on


@pytest.fixture(scope="module", params=["edge", "server"])
def stack(
    request: pytest.FixtureRequest,
    redis_server: RedisServer,
    embedding_server: EmbeddingServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    folder = tmp_path_factory.mktemp("hybrid")
    services = fresh_services(redis_server, embedding_server)
    with stack_on(
        request.param,
        services.redis_url,
        services.embedding_url,
        folder,
        lake_agents(),
        MEMORY_POOL_BACKFILL_INTERVAL=0.2,
    ) as running:
        yield running


def test_a_name_the_dense_leg_ranks_low_is_in_the_top_five(stack: Stack) -> None:
    save_lake_chunks(stack, "lake")
    save_lake_chunks(stack, "lakedense")
    # The Discord plugin's body: no threshold, no limit (0.3 and 5).
    dense = retrieve(stack, bot="lakedense", query_text=QUESTION)
    assert len(dense["hits"]) == 5
    assert all(NAME not in hit["payload"]["text"] for hit in dense["hits"])

    hybrid = retrieve(stack, bot="lake", query_text=QUESTION)
    assert len(hybrid["hits"]) == 5
    named = [hit for hit in hybrid["hits"] if NAME in hit["payload"]["text"]]
    assert len(named) == 1
    # it came from the lexical leg: the dense one admits nothing below the 0.3 threshold
    assert named[0]["score"] < 0.3 <= min(h["score"] for h in hybrid["hits"] if h is not named[0])
    # `score` is the dense cosine, as st-qdrant-memory prints it; the block byte for byte
    assert hybrid["formatted"] == expected_block(hybrid["hits"], "User")
    cosine = dict((h["id"], h["score"]) for h in retrieve(
        stack, bot="lake", query_text=QUESTION, recall="dense", limit=100, score_threshold=-1
    )["hits"])  # fmt: skip
    for hit in hybrid["hits"]:
        assert hit["score"] == pytest.approx(cosine[hit["id"]], abs=1e-6)

    # per request: dense on a hybrid agent ranks as the dense agent does
    as_dense = retrieve(stack, bot="lake", query_text=QUESTION, recall="dense")
    assert all(h["fused_score"] is None for h in as_dense["hits"])
    assert [h["payload"]["text"] for h in as_dense["hits"]] == [
        h["payload"]["text"] for h in dense["hits"]
    ]
    strict = retrieve(stack, bot="lake", query_text=QUESTION, lexical_threshold=1000)
    assert all(NAME not in hit["payload"]["text"] for hit in strict["hits"])
    rrf = retrieve(stack, bot="lake", query_text=QUESTION, fusion="rrf")
    assert any(NAME in hit["payload"]["text"] for hit in rrf["hits"])


def test_exclusions_filters_and_fill_hold_with_fusion(stack: Stack) -> None:
    hybrid = retrieve(stack, bot="lake", query_text=QUESTION, limit=10)
    named = next(hit for hit in hybrid["hits"] if NAME in hit["payload"]["text"])
    # excluded by one of its message ids: gone, and the limit is filled from the rest
    one_id = named["payload"]["messageIds"].split(",")[1]
    answer = retrieve(stack, bot="lake", query_text=QUESTION, exclude_message_ids=[one_id])
    assert len(answer["hits"]) == 5
    assert all(NAME not in hit["payload"]["text"] for hit in answer["hits"])
    # exclude the top 30 chunks: the fill goes past the first prefetch
    top = retrieve(stack, bot="lake", query_text=QUESTION, limit=30)["hits"]
    excluded = [hit["payload"]["messageIds"].split(",")[0] for hit in top]
    rest = retrieve(stack, bot="lake", query_text=QUESTION, exclude_message_ids=excluded)
    assert len(rest["hits"]) == 5
    assert {h["id"] for h in rest["hits"]}.isdisjoint(h["id"] for h in top)
    # a filter applies to both legs: the named chunk is in another conversation's channel
    since = retrieve(stack, bot="lake", query_text=NAME, since=BASE_TS + 98 * 60_000)
    assert [NAME in h["payload"]["text"] for h in since["hits"]] == [True]


@pytest.mark.parametrize("threshold", ["Infinity", "1e400", "1e39"])
def test_a_lexical_threshold_beyond_any_score_is_refused(stack: Stack, threshold: str) -> None:
    """JSON's Infinity (and 1e400, read as it) reached a Qdrant server as `null`: no threshold,
    so every lexical match was admitted, the opposite of what was asked; above float32's range
    Qdrant cannot hold it either. A 422 that names the field, never a silent reading."""
    body = f'{{"bot": "lake", "query_text": "{NAME}", "lexical_threshold": {threshold}}}'
    response = stack.client.post(
        "/retrieve", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422, response.text
    assert response.json()["error"] == "invalid_request"
    assert response.json()["detail"].startswith("lexical_threshold: ")


def _drop(stack: Stack, name: str) -> None:
    store = stack.runtime.store
    if isinstance(store, EdgeStore):
        store.drop_collection(name)
    else:
        assert isinstance(store, QdrantStore)
        store.read(name, lambda client: client.delete_collection(name), missing=None)


def _wait_backfilled(stack: Stack, bot: str, timeout: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stats = stack.client.get(f"/agents/{bot}/stats").json()
        if stats.get("bm25") and stats.get("points_without_bm25") == 0:
            return stats
        time.sleep(0.1)
    raise AssertionError(f"the backfill did not finish: {stats}")


def _backfilled_total(stack: Stack) -> float:
    """The backfill counter of /metrics (the stack's worker shares the API's process)."""
    for line in stack.client.get("/metrics").text.splitlines():
        if line.startswith("memory_pool_backfill_points_total "):
            return float(line.split()[1])
    raise AssertionError("no memory_pool_backfill_points_total in /metrics")


def test_st_qdrant_memory_points_are_backfilled_then_found_lexically(stack: Stack) -> None:
    name = "mem_seraphina"
    before = _backfilled_total(stack)
    dims, ids = st_collection(stack, name)
    stats = _wait_backfilled(stack, "seraphina")
    assert stats["points"] == 41 and stats["recall"] == "hybrid"
    assert _backfilled_total(stack) - before == 41
    # what st-qdrant-memory reads is unchanged: the unnamed vector's size, payloads as written
    state = stack.runtime.store.collection(name)
    assert state is not None and state.size == dims and state.has_bm25
    assert sorted(pid for pid, _ in stack.runtime.store.scroll_payloads(name)) == sorted(ids)
    # the lexical leg finds the one chunk naming Bartholomew
    answer = retrieve(stack, bot="seraphina", query_text=f"Bartholomew and {TRIP}")
    assert ids[-1] in [hit["id"] for hit in answer["hits"]]
    assert answer["formatted"] == expected_block(answer["hits"], "User")
    # st keeps writing dense-only points with new ids: accepted, and backfilled in turn
    text = "[2024-06-01]\nAlex: Bartholomew again\nSeraphina: yes"
    late = {"id": str(uuid.uuid4()), "vector": embed_text(text, dims),
            "payload": {"text": text, **st_chunk(["late-a", "late-b"], BASE_TS)}}  # fmt: skip
    st_requests(stack, name, dims, [late])
    assert _wait_backfilled(stack, "seraphina")["points"] == 42
    # only the lexical leg can bring it: no cosine reaches 0.99
    again = retrieve(
        stack, bot="seraphina", query_text="Bartholomew", score_threshold=0.99, lexical_threshold=1
    )
    assert {late["id"], ids[-1]} == {hit["id"] for hit in again["hits"]}


def test_a_collection_made_again_without_bm25_is_recalled_dense_then_gets_it_back(
    stack: Stack,
) -> None:
    """st-qdrant-memory's "Delete All Memories" drops the collection; it makes it again with its
    unnamed vector only. Recall must not fail meanwhile, and the backfill adds BM25 again."""
    name = "mem_seraphina"
    assert retrieve(stack, bot="seraphina", query_text="Bartholomew")["hits"]  # known: hybrid
    _drop(stack, name)
    dims, _ = st_collection(stack, name)
    # dense while the vector is missing (unless the backfill was quicker): never a 500
    answer = retrieve(stack, bot="seraphina", query_text=f"Bartholomew and {TRIP}")
    assert len(answer["hits"]) == 5
    assert answer["formatted"] == expected_block(answer["hits"], "User")
    stats = _wait_backfilled(stack, "seraphina")
    assert stats["points"] == 41
    state = stack.runtime.store.collection(name)
    assert state is not None and state.has_bm25 and state.size == dims

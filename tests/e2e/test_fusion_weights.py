"""Fusion weights end to end, on Qdrant Edge (serve's embedded engine) and on the Qdrant REST
test server: /retrieve's `lexical_weight`, the agents file's, and the 422s of a bad one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.embedding_server import EmbeddingServer
from tests.support.hybrid_lake import NAME, QUESTION, lake_agents, retrieve, save_lake_chunks
from tests.support.redis_server import RedisServer
from tests.support.stack import Stack
from tests.support.store_stacks import fresh_services, stack_on


@pytest.fixture(scope="module", params=["edge", "server"])
def stack(
    request: pytest.FixtureRequest,
    redis_server: RedisServer,
    embedding_server: EmbeddingServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    folder = tmp_path_factory.mktemp("weights")
    services = fresh_services(redis_server, embedding_server)
    with stack_on(
        request.param, services.redis_url, services.embedding_url, folder, lake_agents()
    ) as running:
        for bot in ("lake", "lakeflat", "lakerrf"):
            save_lake_chunks(running, bot)
        yield running


def named_rank(answer: dict) -> int | None:
    """Where the one chunk naming Zephyrine (found by the lexical leg alone) came, if at all."""
    texts = [hit["payload"]["text"] for hit in answer["hits"]]
    return next((rank for rank, text in enumerate(texts) if NAME in text), None)


@pytest.mark.parametrize("fusion", ["dbsf", "rrf"])
def test_the_request_weight_moves_the_lexical_match(stack: Stack, fusion: str) -> None:
    def rank(weight: float) -> int | None:
        answer = retrieve(stack, bot="lake", query_text=QUESTION, fusion=fusion,
                          lexical_weight=weight)  # fmt: skip
        # whatever the order, `score` stays the dense cosine and the hits are the same
        assert all(hit["score"] == pytest.approx(cosines[hit["id"]], abs=1e-6)
                   for hit in answer["hits"])  # fmt: skip
        return named_rank(answer)

    dense = retrieve(stack, bot="lake", query_text=QUESTION, recall="dense", limit=100,
                     score_threshold=-1)  # fmt: skip
    cosines = {hit["id"]: hit["score"] for hit in dense["hits"]}
    flat, equal, double, heavy = rank(0.0), rank(1.0), rank(2.0), rank(10.0)
    assert heavy == 0  # the lexical leg leads
    assert equal is not None and double is not None and equal >= double >= heavy
    if fusion == "dbsf":  # at equal weights behind some dense hits (Edge's RRF, k 60: first)
        assert equal > heavy
    # 0: after every chunk the dense leg admitted, beyond these 5
    assert flat is None


def test_the_default_weight_finds_the_name_in_the_top_five(stack: Stack) -> None:
    """The Discord plugin's body: no weight, so the agent's (the default, 2)."""
    assert named_rank(retrieve(stack, bot="lake", query_text=QUESTION)) is not None


def test_the_agents_file_weight_applies_and_a_request_overrides_it(stack: Stack) -> None:
    # lakeflat: weight 0, the dense order; lakerrf: rrf at weight 10, the lexical leg first
    assert named_rank(retrieve(stack, bot="lakeflat", query_text=QUESTION)) is None
    assert named_rank(retrieve(stack, bot="lakerrf", query_text=QUESTION)) == 0
    assert named_rank(retrieve(stack, bot="lakeflat", query_text=QUESTION, lexical_weight=10)) == 0
    health = stack.client.get("/health").json()["agents"]
    assert (health["lakeflat"]["fusion"], health["lakeflat"]["lexical_weight"]) == ("dbsf", 0.0)
    assert (health["lakerrf"]["fusion"], health["lakerrf"]["lexical_weight"]) == ("rrf", 10.0)


@pytest.mark.parametrize("weight", ["-0.5", "10.5", "Infinity", "NaN", "1e400", '"heavy"'])
def test_a_bad_weight_is_refused(stack: Stack, weight: str) -> None:
    body = f'{{"bot": "lake", "query_text": "{NAME}", "lexical_weight": {weight}}}'
    response = stack.client.post(
        "/retrieve", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422, response.text
    assert response.json()["error"] == "invalid_request"
    assert response.json()["detail"].startswith("lexical_weight: ")

"""A hostile user's /retrieve on both stores (Qdrant Edge and the REST test server): odd time
words at the ends of time never fail and never empty what dense recall finds; a Japanese
agent's chunks, written by a real flush, are found by a name typed full-width or half-width;
10,000 unknown excluded ids change nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from shared.agents import AgentConfig, Agents
from tests.support.embedding_server import EmbeddingServer
from tests.support.hybrid_lake import NAME, QUESTION, save_lake_chunks
from tests.support.redis_server import RedisServer
from tests.support.st_memory import BASE_TS, DAY, message
from tests.support.stack import Stack
from tests.support.store_stacks import stack_on

MAX_MS = 253_402_300_799_999  # /retrieve's largest `now`


@pytest.fixture(scope="module", params=["edge", "server"])
def stack(
    request: pytest.FixtureRequest,
    redis_server: RedisServer,
    embedding_server: EmbeddingServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    agents = Agents(
        [AgentConfig(name="lake", self_speaker="Mythos"),
         AgentConfig(name="yui", self_speaker="Yui", language="japanese")],
        accept_unlisted=False,
    )  # fmt: skip
    folder = tmp_path_factory.mktemp("v3")
    with stack_on(request.param, redis_server.url, embedding_server.url, folder, agents) as on:
        save_lake_chunks(on, "lake")
        yield on


def hits(stack: Stack, **body: Any) -> list[dict[str, Any]]:
    response = stack.client.post("/retrieve", json=body)
    assert response.status_code == 200, (body, response.text)
    return list(response.json()["hits"])


ODD_QUERIES = [
    "May is coming over", "we march on", "in 1850", "yesterday yesterday", "999 years ago",
    "in 2099", "2026-13-45", "on May 99", "this week", "😀 yesterday 😀", "昨日 yesterday",
    f"{QUESTION} the day before yesterday in May 2024", f"{NAME} last week", "in 2024-06-10",
    "yesterday", "in May " * 200,
]  # fmt: skip


@pytest.mark.parametrize("mode", ["hybrid", "dense"])
def test_odd_time_words_at_any_now_never_fail_nor_empty_a_dense_answer(
    stack: Stack, mode: str
) -> None:
    """The chunks are of 2024-06-10: `now` the next day puts many in the windows; 0 and the
    last storable ms put the windows before 1970 and in year 9999."""
    for now in (0, BASE_TS + DAY, MAX_MS):
        for query in ODD_QUERIES:
            body = {"bot": "lake", "query_text": query, "recall": mode, "limit": 10, "now": now}
            timed = hits(stack, **body)
            plain = hits(stack, **body, time_words=False)
            if mode == "dense":  # hybrid's terms differ: the time words leave them
                assert len(timed) >= len(plain), (query, now)


def test_the_window_never_empties_what_filters_and_exclusions_leave(stack: Stack) -> None:
    query, now = f"{QUESTION} yesterday", BASE_TS + DAY
    everything = [f"lake{n}-{k}" for n in range(40) for k in (1, 2)]
    narrowings = [{"since": BASE_TS + 10 * 60_000}, {"until": BASE_TS + 10 * 60_000},
                  {"since": BASE_TS + 5 * DAY}, {"exclude_message_ids": everything}]  # fmt: skip
    for narrowed in narrowings:
        body = {"bot": "lake", "query_text": query, "now": now, "limit": 10, **narrowed}
        assert len(hits(stack, **body)) == len(hits(stack, **body, time_words=False))


def test_a_japanese_name_is_found_however_it_was_typed(stack: Stack) -> None:
    lines = ["昨日、山田さんと浅草の雷門で抹茶アイスを食べました。",
             "今日は雨なので家で本を読んでいます。",
             "ＵＳＪで佐々木さんと遊んだ", "週末は京都に行きたいです"]  # fmt: skip
    messages = []
    for n, line in enumerate(lines * 4):
        ts, conversation = BASE_TS + n * 60_000, f"y{n}"
        messages.append(message(f"yui{n}-1", f"{line} {n}", ts, conversation=conversation))
        messages.append(message(f"yui{n}-2", "そうですね", ts + 1, self_=True,
                                conversation=conversation))  # fmt: skip
    assert stack.save({"bot": "yui", "messages": messages})["accepted"] == 32
    stack.flush("yui")
    for question, line in (("雷門", 0), ("USJ", 2), ("ＵＳＪ", 2), ("佐々木", 2)):
        found = hits(stack, bot="yui", query_text=question, limit=3, lexical_threshold=0.5)
        assert found and all(lines[line] in h["payload"]["text"] for h in found), question


def test_ten_thousand_unknown_excluded_ids_change_nothing(stack: Stack) -> None:
    unknown = [f"never-{i}" for i in range(10_000)]
    plain = hits(stack, bot="lake", query_text=QUESTION)
    assert hits(stack, bot="lake", query_text=QUESTION, exclude_message_ids=unknown) == plain


def test_a_name_only_bm25_finds_is_still_found_beside_time_words(stack: Stack) -> None:
    """The time words leave the BM25 terms, the name stays: inside the window (the day before
    `now`) and outside it (years later), the chunk only the lexical leg finds comes back."""
    for now in (BASE_TS + DAY, BASE_TS + 900 * DAY):
        for words in ("yesterday", "last weekend", "in May", "2 days ago"):
            found = hits(stack, bot="lake", query_text=f"what did {NAME} do {words}", now=now)
            assert any(NAME in h["payload"]["text"] for h in found), (words, now)

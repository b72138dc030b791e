"""Time windows in recall on both stores (Qdrant Edge and the REST test server): the window's
chunks come first, an empty window still answers from the rest, and exclusions, thresholds,
filters and the limit hold; the time words leave the BM25 terms."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from api.recall.lexical import LexicalCollections
from api.recall.query_cache import QueryCache
from api.recall.query_filter import RecallFilters
from api.recall.request import Recall, RecallRequest
from api.recall.service import recall
from shared.agents import AgentConfig
from shared.embedding.bm25 import document_terms
from shared.format.messages import Message
from shared.format.naming import point_id
from shared.format.payload import ChunkContext, chunk_payload, chunk_text
from shared.store.interface import PointToWrite, Store
from tests.support.stores import KINDS, open_store

AGENT = AgentConfig(name="timewords", self_speaker="Mythos")
DIM = 8
DAY = 86_400_000
NOW = int(datetime(2026, 12, 4, 18, 30, tzinfo=UTC).timestamp() * 1000)  # a Friday
WEEKEND = int(datetime(2026, 11, 28, 15, 0, tzinfo=UTC).timestamp() * 1000)  # "last weekend"
# (message id, text, time, cosine to every query): the weekend's chunk is the least alike
CHUNKS = [
    ("soup", "we cooked a pumpkin soup together", NOW - 20 * DAY, 0.90),
    ("pasta", "we cooked fresh pasta with basil", NOW - 12 * DAY, 0.85),
    ("curry", "we cooked a green curry, too spicy", NOW - 40 * DAY, 0.80),
    ("bread", "we baked bread and cooked jam", NOW - 60 * DAY, 0.75),
    ("tacos", "we cooked tacos for the neighbours", NOW - 90 * DAY, 0.70),
    ("risotto", "we cooked a mushroom risotto", WEEKEND, 0.50),
    # below every threshold here; only BM25 can bring it, on the words "last weekend"
    ("words", "last weekend was a weekend like any last weekend", NOW - 200 * DAY, 0.05),
]


class AxisEmbedder:
    """Every query is the first axis; a chunk's vector is set by its cosine to it."""

    model = "axis"

    def dimensions(self) -> int:
        return DIM

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [[1.0] + [0.0] * (DIM - 1) for _ in texts]


def _vector(cosine: float) -> list[float]:
    return [cosine, math.sqrt(1 - cosine * cosine)] + [0.0] * (DIM - 2)


@pytest.fixture(params=KINDS, scope="module")
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    with open_store(request.param, Path(tmp_path_factory.mktemp("tw"))) as opened:
        name = AGENT.collection_name
        opened.ensure_collection(name, size=DIM, model=AxisEmbedder.model)
        points = []
        for mid, text, ts, cosine in CHUNKS:
            messages = [
                Message(f"{mid}-1", text, ts, "Alex", user_id="1"),
                Message(f"{mid}-2", "yes, lovely", ts + 1, "Mythos", is_self=True),
            ]
            points.append(PointToWrite(
                point_id(name, "discord", messages[0].id), _vector(cosine),
                chunk_payload(messages, ChunkContext("discord", channel_id="c1")),
                document_terms(chunk_text(messages)),
            ))  # fmt: skip
        opened.upsert(name, points)
        yield opened


def _ask(store: Store, query: str, **fields: Any) -> Recall:
    # equal weights: with the default 2, BM25 alone puts "words" first when time words are off
    # (the order these tests compare against); the window rule is the same at any weight
    base = RecallRequest(query, frozenset(), 3, 0.3, RecallFilters(), time_words=True, now=NOW,
                         lexical_weight=1.0)  # fmt: skip
    return recall(
        AGENT, replace(base, **fields), store=store,
        cache=QueryCache(AxisEmbedder()),  # type: ignore[arg-type]
        lexical=LexicalCollections(store),
    )  # fmt: skip


def _firsts(found: Recall) -> list[str]:
    return [str(h.payload["messageIds"]).split(",")[0].split("-")[0] for h in found.hits]


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_the_window_puts_its_chunk_first_and_the_rest_fills(store: Store, mode: str) -> None:
    query = "what did we cook last weekend?"
    assert _firsts(_ask(store, query, mode=mode, time_words=False)) == ["soup", "pasta", "curry"]
    assert _firsts(_ask(store, query, mode=mode)) == ["risotto", "soup", "pasta"]
    # `now` moves the window: a week later, "last weekend" holds nothing, the answer stands
    later = _ask(store, query, mode=mode, now=NOW + 7 * DAY)
    assert _firsts(later) == ["soup", "pasta", "curry"]
    # a window holding nothing (May) is no filter: the answer is the plain one
    assert _firsts(_ask(store, "what did we cook in May", mode=mode)) == ["soup", "pasta", "curry"]


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_exclusions_thresholds_and_filters_hold_inside_the_window(store: Store, mode: str) -> None:
    query = "what did we cook last weekend?"
    excluded = _ask(store, query, mode=mode, excluded_ids=frozenset({"risotto-2"}))
    assert _firsts(excluded) == ["soup", "pasta", "curry"]
    # the risotto's cosine (0.5) is below this threshold: the window does not lift it
    assert _firsts(_ask(store, query, mode=mode, score_threshold=0.6)) == ["soup", "pasta", "curry"]
    # since/until narrow the window too
    since = RecallFilters(since=NOW - 15 * DAY)
    assert _firsts(_ask(store, query, mode=mode, filters=since)) == ["risotto", "pasta"]
    # until leaves the window out: only the filter applies
    until = RecallFilters(until=NOW - 10 * DAY)
    assert _firsts(_ask(store, query, mode=mode, filters=until)) == ["soup", "pasta", "curry"]
    # a filter the window's chunk fails (another channel) keeps it out
    other = RecallFilters(channel_id="c2")
    assert _ask(store, query, mode=mode, filters=other).hits == []
    assert len(_ask(store, "what did we cook last weekend?", mode=mode, limit=1).hits) == 1


def test_the_time_words_leave_the_bm25_terms(store: Store) -> None:
    query = "last weekend"
    lexical = {"mode": "hybrid", "lexical_threshold": 0.0, "limit": 10}
    # off: "last weekend" is a lexical match for the chunk that merely says it
    assert "words" in _firsts(_ask(store, query, time_words=False, **lexical))
    # on: the words are the window, not terms; nothing else matches below the threshold
    found = _firsts(_ask(store, query, **lexical))
    assert "words" not in found
    assert found[0] == "risotto"

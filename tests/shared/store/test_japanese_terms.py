"""Japanese BM25 terms on both stores (Qdrant Edge and a server): SudachiPy's words beside the
bigrams, for `japanese` and for `auto` on a text with kana, and collections recorded before
them termed again by the backfill."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from shared.agents import AgentConfig
from shared.embedding.bm25 import document_terms, encoding_of
from shared.store import bm25_terms as bm25_store
from shared.store.interface import PointToWrite, Store
from tests.shared.store.test_cjk_terms import DIM, NAME, FarEmbedder, chunk_vec, recalled
from tests.support.redis_server import RedisServer
from tests.support.stores import KINDS, open_store
from workers.backfill import backfill
from workers.collections import CollectionGuard

CHUNKS = [
    "Yui: 先週、友達とカラオケで歌いました。",
    "Yui: 今日は雨なので家で本を読んでいます。",
    "Yui: 昨日、山田さんと浅草の雷門で抹茶アイスを食べました。",
    "Yui: 明日は早く起きる。",
    "Yui: 週末に海で泳ぎたい。",
]
# 歌った shares no bigram with 歌いました: only SudachiPy's 歌う finds chunk 0
ASKED = "誰と歌った？"


def _write(store: Store, language: str) -> None:
    store.ensure_collection(NAME, size=DIM, model=FarEmbedder.model)
    store.upsert(NAME, [
        PointToWrite(str(uuid.uuid4()), chunk_vec(i), {"text": text},
                     document_terms(text, language))
        for i, text in enumerate(CHUNKS)
    ])  # fmt: skip


@pytest.fixture(params=KINDS)
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with open_store(request.param, tmp_path) as store:
        yield store


@pytest.mark.parametrize("language", ["japanese", "auto"])
def test_a_verb_asked_in_another_form_finds_its_chunk(opened: Store, language: str) -> None:
    _write(opened, language)
    assert recalled(opened, ASKED, language)[:1] == [CHUNKS[0]]
    assert CHUNKS[0] not in recalled(opened, ASKED, language, mode="dense")


def test_with_bigrams_alone_it_is_not_found(opened: Store) -> None:
    # what SudachiPy adds: the same question and chunks, cut as korean (bigrams only)
    _write(opened, "korean")
    assert CHUNKS[0] not in recalled(opened, ASKED, "korean")


@pytest.mark.parametrize(
    ("language", "recorded"),
    [("japanese", "v1:english+nfkc-cjk-bigrams"),
     ("auto", "v1:english+nfkc-cjk-bigrams+jieba-0.42.1")],
)  # fmt: skip
def test_a_collection_termed_before_sudachi_is_termed_again(
    opened: Store, redis_server: RedisServer, language: str, recorded: str
) -> None:
    """A japanese or auto collection recorded before SudachiPy's words gets its terms dropped
    and made again, so the verb finds its chunk afterwards."""
    _write(opened, "korean")
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    bm25_store.record_encoding(opened, NAME, recorded)
    guard = CollectionGuard(opened, FarEmbedder(), client)  # type: ignore[arg-type]
    report = backfill([AgentConfig(name="cjk", language=language)], store=opened,
                      collections=guard, client=client)  # fmt: skip
    client.close()
    assert report.dropped == [NAME] and report.points == len(CHUNKS)
    state = opened.collection(NAME)
    assert state is not None and state.bm25_encoding == encoding_of(language)
    assert bm25_store.lacking_terms(opened, NAME) == 0
    assert recalled(opened, ASKED, language)[:1] == [CHUNKS[0]]

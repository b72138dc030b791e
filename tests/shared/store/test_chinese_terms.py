"""Chinese BM25 terms on both stores (Qdrant Edge and a server): jieba's words beside the
bigrams, for `chinese` and for `auto` on a text of Han alone, and a collection of the bigrams'
encoding termed again by the backfill."""

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
    "Lin: 小明说他昨天见到张伟了。",
    "Lin: 我昨天买了一台洗衣机。",
    # the washing machine's bigrams, more often than in its own chunk, and not the word
    "Lin: 洗衣服很累，衣机两个字，洗衣店里洗衣。",
    "Lin: 周末我们把 Raspberry Pi 装进了车库里的机柜。",
    "Yui: 洗衣机を買ったよ。",
]


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


@pytest.mark.parametrize("language", ["chinese", "auto"])
def test_a_name_jieba_glues_to_a_verb_is_still_found_by_its_bigram(
    opened: Store, language: str
) -> None:
    # jieba cuts 小明说 as 小 / 明说: the bigram 小明 finds the chunk
    _write(opened, language)
    assert CHUNKS[0] in recalled(opened, "小明是谁？", language)[:1]
    assert CHUNKS[0] not in recalled(opened, "小明是谁？", language, mode="dense")


@pytest.mark.parametrize("language", ["chinese", "auto"])
def test_a_word_only_jieba_gives_whole_puts_its_chunk_first(opened: Store, language: str) -> None:
    _write(opened, language)
    assert recalled(opened, "洗衣机坏了", language)[:1] == [CHUNKS[1]]


def test_with_bigrams_alone_the_chunk_of_the_bigrams_comes_first(opened: Store) -> None:
    # what jieba's word adds: the same question and chunks, cut as korean (bigrams only)
    _write(opened, "korean")
    assert recalled(opened, "洗衣机坏了", "korean")[:1] == [CHUNKS[2]]


@pytest.mark.parametrize("language", ["chinese", "auto"])
def test_mixed_chinese_and_english_is_found_by_both(opened: Store, language: str) -> None:
    _write(opened, language)
    assert CHUNKS[3] in recalled(opened, "raspberry pis", language)[:1]
    assert CHUNKS[3] in recalled(opened, "车库里有什么？", language)[:1]


def test_auto_cuts_a_japanese_text_as_japanese(opened: Store) -> None:
    # 洗衣机を買った has kana: Japanese (SudachiPy's words), so its 洗衣机 is no word of its
    # own and the Chinese chunk, which has the word, is the first for a Chinese question
    _write(opened, "auto")
    assert document_terms(CHUNKS[4], "auto") == document_terms(CHUNKS[4], "japanese")
    assert recalled(opened, "洗衣机坏了", "auto")[:1] == [CHUNKS[1]]


@pytest.mark.parametrize("language", ["chinese", "auto"])
def test_a_collection_of_bigrams_alone_is_termed_again_with_words(
    opened: Store, redis_server: RedisServer, language: str
) -> None:
    """A chinese or auto collection recorded before jieba ("+nfkc-cjk-bigrams") gets its terms
    dropped and made again, so the word finds its chunk first afterwards."""
    _write(opened, "korean")
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    bm25_store.record_encoding(opened, NAME, "v1:english+nfkc-cjk-bigrams")
    guard = CollectionGuard(opened, FarEmbedder(), client)  # type: ignore[arg-type]
    report = backfill([AgentConfig(name="cjk", language=language)], store=opened,
                      collections=guard, client=client)  # fmt: skip
    client.close()
    assert report.dropped == [NAME] and report.points == len(CHUNKS)
    state = opened.collection(NAME)
    assert state is not None and state.bm25_encoding == encoding_of(language)
    assert bm25_store.lacking_terms(opened, NAME) == 0
    assert recalled(opened, "洗衣机坏了", language)[:1] == [CHUNKS[1]]


def test_a_korean_collection_keeps_its_terms(opened: Store, redis_server: RedisServer) -> None:
    _write(opened, "korean")
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    bm25_store.record_encoding(opened, NAME, encoding_of("korean"))
    guard = CollectionGuard(opened, FarEmbedder(), client)  # type: ignore[arg-type]
    report = backfill([AgentConfig(name="cjk", language="korean")], store=opened,
                      collections=guard, client=client)  # fmt: skip
    client.close()
    assert report.dropped == []

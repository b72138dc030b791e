"""Chinese BM25 terms on both stores (Qdrant Edge and a server): jieba's words beside the
bigrams, for `chinese` and for `auto` on a text of Han alone, and a collection of the bigrams'
encoding termed again by the backfill."""

from __future__ import annotations

import pytest

from shared.embedding.bm25 import document_terms, encoding_of
from shared.store.interface import Store
from tests.shared.store.test_cjk_terms import recalled, reterm, termed_anew, write_chunks
from tests.support.redis_server import RedisServer

CHUNKS = [
    "Lin: 小明说他昨天见到张伟了。",
    "Lin: 我昨天买了一台洗衣机。",
    # the washing machine's bigrams, more often than in its own chunk, and not the word
    "Lin: 洗衣服很累，衣机两个字，洗衣店里洗衣。",
    "Lin: 周末我们把 Raspberry Pi 装进了车库里的机柜。",
    "Yui: 洗衣机を買ったよ。",
]


@pytest.mark.parametrize("language", ["chinese", "auto"])
def test_a_name_jieba_glues_to_a_verb_is_still_found_by_its_bigram(
    opened: Store, language: str
) -> None:
    # jieba cuts 小明说 as 小 / 明说: the bigram 小明 finds the chunk
    write_chunks(opened, CHUNKS, language)
    assert CHUNKS[0] in recalled(opened, "小明是谁？", language)[:1]
    assert CHUNKS[0] not in recalled(opened, "小明是谁？", language, mode="dense")


@pytest.mark.parametrize("language", ["chinese", "auto"])
def test_a_word_only_jieba_gives_whole_puts_its_chunk_first(opened: Store, language: str) -> None:
    write_chunks(opened, CHUNKS, language)
    assert recalled(opened, "洗衣机坏了", language)[:1] == [CHUNKS[1]]


def test_with_bigrams_alone_the_chunk_of_the_bigrams_comes_first(opened: Store) -> None:
    # what jieba's word adds: the same question and chunks, cut as korean (bigrams only)
    write_chunks(opened, CHUNKS, "korean")
    assert recalled(opened, "洗衣机坏了", "korean")[:1] == [CHUNKS[2]]


@pytest.mark.parametrize("language", ["chinese", "auto"])
def test_mixed_chinese_and_english_is_found_by_both(opened: Store, language: str) -> None:
    write_chunks(opened, CHUNKS, language)
    assert CHUNKS[3] in recalled(opened, "raspberry pis", language)[:1]
    assert CHUNKS[3] in recalled(opened, "车库里有什么？", language)[:1]


def test_auto_cuts_a_japanese_text_as_japanese(opened: Store) -> None:
    # 洗衣机を買った has kana: Japanese (SudachiPy's words), so its 洗衣机 is no word of its
    # own and the Chinese chunk, which has the word, is the first for a Chinese question
    write_chunks(opened, CHUNKS, "auto")
    assert document_terms(CHUNKS[4], "auto") == document_terms(CHUNKS[4], "japanese")
    assert recalled(opened, "洗衣机坏了", "auto")[:1] == [CHUNKS[1]]


@pytest.mark.parametrize("language", ["chinese", "auto"])
def test_a_collection_of_bigrams_alone_is_termed_again_with_words(
    opened: Store, redis_server: RedisServer, language: str
) -> None:
    """A chinese or auto collection recorded before jieba ("+nfkc-cjk-bigrams") gets its terms
    dropped and made again, so the word finds its chunk first afterwards."""
    write_chunks(opened, CHUNKS, "korean")
    report = reterm(opened, redis_server.url, "v1:english+nfkc-cjk-bigrams", language)
    assert termed_anew(opened, report, len(CHUNKS), language)
    assert recalled(opened, "洗衣机坏了", language)[:1] == [CHUNKS[1]]


def test_a_korean_collection_keeps_its_terms(opened: Store, redis_server: RedisServer) -> None:
    write_chunks(opened, CHUNKS, "korean")
    assert reterm(opened, redis_server.url, encoding_of("korean"), "korean").dropped == []

"""Japanese BM25 terms on both stores (Qdrant Edge and a server): SudachiPy's words beside the
bigrams, for `japanese` and for `auto` on a text with kana, and collections recorded before
them termed again by the backfill."""

from __future__ import annotations

import pytest

from shared.store.interface import Store
from tests.shared.store.test_cjk_terms import recalled, reterm, termed_anew, write_chunks
from tests.support.redis_server import RedisServer

CHUNKS = [
    "Yui: 先週、友達とカラオケで歌いました。",
    "Yui: 今日は雨なので家で本を読んでいます。",
    "Yui: 昨日、山田さんと浅草の雷門で抹茶アイスを食べました。",
    "Yui: 明日は早く起きる。",
    "Yui: 週末に海で泳ぎたい。",
]
# 歌った shares no bigram with 歌いました: only SudachiPy's 歌う finds chunk 0
ASKED = "誰と歌った？"


@pytest.mark.parametrize("language", ["japanese", "auto"])
def test_a_verb_asked_in_another_form_finds_its_chunk(opened: Store, language: str) -> None:
    write_chunks(opened, CHUNKS, language)
    assert recalled(opened, ASKED, language)[:1] == [CHUNKS[0]]
    assert CHUNKS[0] not in recalled(opened, ASKED, language, mode="dense")


def test_with_bigrams_alone_it_is_not_found(opened: Store) -> None:
    # what SudachiPy adds: the same question and chunks, cut as korean (bigrams only)
    write_chunks(opened, CHUNKS, "korean")
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
    write_chunks(opened, CHUNKS, "korean")
    report = reterm(opened, redis_server.url, recorded, language)
    assert termed_anew(opened, report, len(CHUNKS), language)
    assert recalled(opened, ASKED, language)[:1] == [CHUNKS[0]]

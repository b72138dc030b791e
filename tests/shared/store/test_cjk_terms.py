"""CJK BM25 terms: bigram cutting as a table, and on both stores (Qdrant Edge and a server) a
question in Chinese, Japanese or Korean finding its chunk by a name the dense leg misses."""

from __future__ import annotations

import unicodedata
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from api.recall.lexical import LexicalCollections
from api.recall.query_cache import QueryCache
from api.recall.query_filter import RecallFilters
from api.recall.request import RecallRequest
from api.recall.service import recall
from shared.agents import AgentConfig
from shared.embedding.bm25 import document_terms, encoding_of, query_terms
from shared.embedding.cjk import segmented
from shared.store import bm25_terms as bm25_store
from shared.store.interface import PointToWrite, Store
from tests.support.redis_server import RedisServer
from tests.support.stores import KINDS, open_store
from workers.backfill import BackfillReport, backfill
from workers.collections import CollectionGuard

NAME = "mem_cjk"
DIM = 8


@pytest.mark.parametrize(
    ("text", "cut"),
    [("雷門", " 雷門 "), ("山田さん", " 山田 田さ さん "), ("我", " 我 "),
     ("서울에서 만나요", " 서울 울에 에서   만나 나요 "),
     ("I love 北京烤鸭!", "I love  北京 京烤 烤鸭 !"), ("plain English", "plain English"),
     ("ｱｲｽ", " アイ イス "), ("佐々木", " 佐々 々木 ")],
)  # fmt: skip
def test_cjk_runs_are_cut_into_bigrams_and_latin_is_left_alone(text: str, cut: str) -> None:
    assert segmented(text) == cut


@pytest.mark.parametrize(
    ("language", "encoding"),
    [("english", "v1:english"), ("klingon", "v1:none"),
     ("japanese", "v1:english+nfkc-cjk-bigrams+sudachi-0.7.0-small-20261015"),
     ("Chinese", "v1:english+nfkc-cjk-bigrams+jieba-0.42.1"),
     ("korean", "v1:english+nfkc-cjk-bigrams"),
     ("auto", "v1:english+nfkc-cjk-bigrams+jieba-0.42.1+sudachi-0.7.0-small-20261015")],
)  # fmt: skip
def test_cjk_languages_record_their_own_encoding(language: str, encoding: str) -> None:
    # a collection switched to a CJK language is termed again by the backfill
    assert encoding_of(language) == encoding


def test_terms_are_the_same_every_time_and_english_collections_keep_theirs() -> None:
    text = "昨日、山田さんと浅草の雷門で抹茶アイスを食べました。"
    assert document_terms(text, "japanese") == document_terms(text, "japanese")
    name = set(query_terms("雷門", "japanese").indices)
    assert name <= set(document_terms(text, "japanese").indices)
    # english does not cut: its stored terms are those of before, and a name is not found
    assert not name & set(document_terms(text, "english").indices)
    assert len(document_terms(text, "english").indices) == 2


class FarEmbedder:
    """Every query points one way, the named chunks elsewhere: only the lexical leg finds them."""

    model = "test-model"

    def dimensions(self) -> int:
        return DIM

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [query_vec() for _ in texts]


def query_vec() -> list[float]:
    return [1.0] + [0.0] * (DIM - 1)


def chunk_vec(i: int) -> list[float]:
    """Chunks 1, 3 and 5 (no names) lean towards every query: they are what dense finds."""
    own = [0.0] * (1 + i % (DIM - 1)) + [1.0] + [0.0] * (DIM - 2 - i % (DIM - 1))
    own[0] = 0.5 if i in (1, 3, 5) else 0.0
    return own


CHUNKS = [
    "Yui: 昨日、山田さんと浅草の雷門で抹茶アイスを食べました。",
    "Yui: 今日は雨なので家で本を読んでいます。",
    "Lin: 我和王小明在西湖边喝了龙井茶。",
    "Lin: 明天我们要去公司开会。",
    "Min: 지난주에 김민준이랑 부산 해운대에 갔어요.",
    "Min: 오늘은 집에서 쉬고 싶어요.",
    "Sam: We met Zephyrine at the Grand Bazaar yesterday.",
    "Sam: 周末我们把 Raspberry Pi 装进了车库里的机柜。",
    # full-width Latin, as Japanese input methods often type it
    "Aoi: 佐々木さんとＵＳＪで遊んだ。",
]


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with open_store(request.param, tmp_path) as opened:
        opened.ensure_collection(NAME, size=DIM, model=FarEmbedder.model)
        opened.upsert(NAME, [
            PointToWrite(str(uuid.uuid4()), chunk_vec(i), {"text": text},
                         document_terms(text, "auto"))
            for i, text in enumerate(CHUNKS)
        ])  # fmt: skip
        yield opened


def write_chunks(store: Store, chunks: list[str], language: str) -> None:
    """The chunks as points of one collection, termed in `language`, vectors by chunk_vec."""
    store.ensure_collection(NAME, size=DIM, model=FarEmbedder.model)
    store.upsert(NAME, [
        PointToWrite(str(uuid.uuid4()), chunk_vec(i), {"text": text},
                     document_terms(text, language))
        for i, text in enumerate(chunks)
    ])  # fmt: skip


def reterm(store: Store, redis_url: str, recorded: str | None, language: str) -> BackfillReport:
    """One backfill of the collection for an agent of `language`, its encoding recorded as
    `recorded` first (as an older version left it)."""
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    if recorded is not None:
        bm25_store.record_encoding(store, NAME, recorded)
    guard = CollectionGuard(store, FarEmbedder(), client)  # type: ignore[arg-type]
    try:
        return backfill([AgentConfig(name="cjk", language=language)], store=store,
                        collections=guard, client=client)  # fmt: skip
    finally:
        client.close()


def termed_anew(store: Store, report: BackfillReport, chunks: int, language: str) -> bool:
    state = store.collection(NAME)
    return (report.dropped == [NAME] and report.points == chunks and state is not None
            and state.bm25_encoding == encoding_of(language)
            and bm25_store.lacking_terms(store, NAME) == 0)  # fmt: skip


def recalled(store: Store, question: str, language: str, mode: str = "hybrid") -> list[str]:
    # eight chunks give every term a small IDF: the threshold a large collection needs is lowered
    request = RecallRequest(question, frozenset(), 2, -1.0, RecallFilters(), mode,  # type: ignore[arg-type]
                            lexical_threshold=1.0)  # fmt: skip
    found = recall(AgentConfig(name="cjk", language=language), request, store=store,
                   cache=QueryCache(FarEmbedder()),  # type: ignore[arg-type]
                   lexical=LexicalCollections(store))  # fmt: skip
    return [str(hit.payload["text"]) for hit in found.hits]


@pytest.mark.parametrize(
    ("question", "chunk"),
    [("雷門で何を食べた？", 0), ("山田さんは誰？", 0), ("王小明去了哪里？", 2),
     ("김민준이랑 어디 갔어?", 4), ("Who is Zephyrine?", 6), ("USJ", 8),
     # Hangul as macOS may paste it: decomposed into jamo
     (unicodedata.normalize("NFD", "김민준이랑 어디 갔어?"), 4)],
    ids=["kaminarimon", "yamada", "wang", "kim", "zephyrine", "full-width-usj", "nfd-kim"],
)  # fmt: skip
def test_a_cjk_question_finds_its_chunk_by_a_name_on_both_stores(
    store: Store, question: str, chunk: int
) -> None:
    assert CHUNKS[chunk] in recalled(store, question, "auto")[:1]
    # the dense leg alone points nowhere near it
    assert CHUNKS[chunk] not in recalled(store, question, "auto", mode="dense")


def test_mixed_text_is_found_by_its_english_and_its_chinese_words(store: Store) -> None:
    # "pis" stems like "pi"; 车库 (garage) is a bigram of the mixed Chinese message
    assert CHUNKS[7] in recalled(store, "车库里有什么？", "chinese")[:1]
    assert CHUNKS[7] in recalled(store, "raspberry pis", "chinese")[:1]
    assert CHUNKS[7] not in recalled(store, "raspberry pis", "chinese", mode="dense")


@pytest.mark.parametrize(
    ("chunk", "question"),
    [("ＮＨＫで見たドラマ", "NHK"), ("NHKで見たドラマ", "ＮＨＫ"), ("２０２４年に行った", "2024"),
     ("Ｔｏｋｙｏ　Ｔｏｗｅｒに行った", "tokyo tower"), ("ﾔﾏﾀﾞさんと会った", "ヤマダさん"),
     ("ヤマダさんと会った", "ﾔﾏﾀﾞ"), (unicodedata.normalize("NFD", "がっこうで会った"), "がっこう"),
     (unicodedata.normalize("NFD", "한국에서 김민수를 만났다"), "김민수"),
     ("김민수를 만났다", unicodedata.normalize("NFD", "김민수")),
     ("佐々木さんと話した", "佐々木"), ("𠮷野家で食べた", "𠮷野家")],
    ids=["full-width", "half-width", "full-width-digits", "ideographic-space", "half-width-kana",
         "half-width-question", "nfd-kana", "nfd-hangul", "nfd-question", "iteration-mark",
         "beyond-bmp"],
)  # fmt: skip
def test_a_name_is_the_same_term_in_every_form_it_is_typed(chunk: str, question: str) -> None:
    """Full-width Latin and digits (IME input), half-width katakana, decomposed kana and Hangul
    (macOS), the iteration mark 々 (佐々木) and Han beyond the BMP (𠮷) are the same terms as
    their usual forms: every bigram of the question (`korean` cuts bigrams only) is one of the
    chunk's. (`auto` reads a question of Han alone, 佐々木, as Chinese and adds jieba's words
    to its bigrams, where the chunk has SudachiPy's: the bigrams are what they share.)"""
    asked = set(query_terms(question, "korean").indices)
    assert asked and asked <= set(document_terms(chunk, "auto").indices)
    assert asked <= set(query_terms(question, "auto").indices)


def test_a_collection_termed_before_nfkc_is_termed_again_by_the_backfill(
    store: Store, redis_server: RedisServer
) -> None:
    """A collection recorded with the first CJK encoding (no NFKC) gets its terms dropped and
    made again, so the full-width chunk is found by an ASCII question afterwards."""
    report = reterm(store, redis_server.url, "v1:english+cjk-bigrams", "japanese")
    assert termed_anew(store, report, len(CHUNKS), "japanese")
    assert CHUNKS[8] in recalled(store, "ＵＳＪ", "japanese")[:1]

"""Chinese cutting: jieba's words beside the bigrams for `chinese` and for `auto` on a text of
Han alone; Japanese (SudachiPy, tests/shared/embedding/test_japanese_words.py), Korean and English
never get jieba's words."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared.embedding import chinese
from shared.embedding.bm25 import _prepared, document_terms, encoding_of, query_terms
from shared.embedding.cjk import MAX_WORD_CHARS, chinese_script, segmented


@pytest.mark.parametrize(
    ("text", "cut"),
    [("我买了洗衣机", " 我 买 了 洗衣机 我买 买了 了洗 洗衣 衣机 "),
     ("小明说", " 小 明说 小明 明说 "),
     ("I love 北京烤鸭!", "I love  北京烤鸭 北京 京烤 烤鸭 !"),
     ("plain English", "plain English"),
     # kana or Hangul in a span: bigrams only, even for `chinese`
     ("山田さんと雷門", " 山田 田さ さん んと と雷 雷門 ")],
)  # fmt: skip
def test_han_spans_get_jiebas_words_and_their_bigrams(text: str, cut: str) -> None:
    assert segmented(text, chinese.words) == cut


@pytest.mark.parametrize(
    ("text", "is_chinese"),
    [("我和王小明", True), ("Only English", True), ("山田さん", False), ("ｱｲｽ", False),
     ("김민준", False), ("雷門で", False)],
)  # fmt: skip
def test_the_script_says_chinese_when_there_is_no_kana_and_no_hangul(
    text: str, is_chinese: bool
) -> None:
    assert chinese_script(text) is is_chinese


@pytest.mark.parametrize(
    ("text", "language", "cut"),
    [("洗衣机", "chinese", " 洗衣机 洗衣 衣机 "), ("洗衣机", "auto", " 洗衣机 洗衣 衣机 "),
     # japanese: SudachiPy's words, which read 洗 as Japanese (洗う)
     ("洗衣机", "japanese", " 洗い 衣 机 洗衣 衣机 "), ("洗衣机", "korean", " 洗衣 衣机 "),
     ("洗衣机", "english", "洗衣机"),
     # auto: a text with kana is Japanese (SudachiPy's words), one with Hangul Korean (bigrams)
     ("洗衣机を買った", "auto", " 洗い 衣 机 買う 洗衣 衣机 机を を買 買っ った "),
     ("洗衣机 샀어", "auto", " 洗衣 衣机   샀어 ")],
)  # fmt: skip
def test_each_language_cuts_as_it_ships(text: str, language: str, cut: str) -> None:
    assert _prepared(text, language) == cut


def test_a_word_only_jieba_gives_is_one_term_of_the_query_and_of_the_document() -> None:
    bigrams = set(query_terms("洗衣机", "korean").indices)
    word = set(query_terms("洗衣机", "chinese").indices) - bigrams
    assert len(word) == 1
    assert word <= set(document_terms("我昨天买了一台洗衣机", "chinese").indices)
    assert word <= set(document_terms("我昨天买了一台洗衣机", "auto").indices)
    assert not word & set(document_terms("我昨天买了一台洗衣机", "japanese").indices)
    assert not word & set(document_terms("我昨天买了一台洗衣机", "korean").indices)


@pytest.mark.parametrize(
    ("language", "encoding"),
    [("chinese", "v1:english+nfkc-cjk-bigrams+jieba-0.42.1"),
     ("Auto", "v1:english+nfkc-cjk-bigrams+jieba-0.42.1+sudachi-0.7.0-small-20261015"),
     ("japanese", "v1:english+nfkc-cjk-bigrams+sudachi-0.7.0-small-20261015"),
     ("korean", "v1:english+nfkc-cjk-bigrams"), ("english", "v1:english")],
)  # fmt: skip
def test_each_word_cutter_is_named_in_the_encoding(language: str, encoding: str) -> None:
    assert encoding_of(language) == encoding


def test_the_warm_up_runs_only_for_a_chinese_or_auto_agent() -> None:
    assert chinese.warm_in_background(["english", "japanese", "korean"]) is None
    thread = chinese.warm_in_background(["english", "Chinese"])
    assert thread is not None
    thread.join(timeout=60)
    assert not thread.is_alive() and chinese.words("西湖") == ["西湖"]


def test_jieba_reads_at_most_max_word_chars_of_a_text_and_bigrams_cover_all_of_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # jieba is pure Python under the GIL: 1,000,000 characters of Han (MEMORY_POOL_MAX_CHARS)
    # took 11.5 s, stalling the worker's other flushes and, through the Qdrant API's upserts,
    # every recall. Its words come from the text's first MAX_WORD_CHARS characters of Han only.
    read: list[str] = []
    jieba_words = chinese.words

    def words(span: str) -> list[str]:
        read.append(span)
        return jieba_words(span)

    monkeypatch.setattr(chinese, "words", words)
    text = "我买了洗衣机。" * 5_000 + "尾巴"
    cut = _prepared(text, "chinese")
    assert sum(len(span) for span in read) <= MAX_WORD_CHARS
    assert read and " 洗衣机 " in cut
    assert cut.endswith(" 尾巴 ")  # the tail's bigram still a term
    assert query_terms("尾巴", "chinese").indices[0] in document_terms(text, "chinese").indices


@pytest.mark.parametrize("cache", [(1, 2), ({"我买": 9}, 9)])
def test_a_jieba_cache_left_in_the_temp_dir_is_never_read(
    tmp_path: Path, cache: tuple[object, int]
) -> None:
    # jieba reads <temp dir>/jieba.cache, which any user (or another jieba's version) may have
    # left there: one of another shape failed every Chinese term (TypeError, a 500 on recall),
    # a made-up one changed the words, so a query could be cut unlike its documents.
    (tmp_path / "jieba.cache").write_bytes(marshal.dumps(cache))
    cut = subprocess.run(
        [sys.executable, "-c", "from shared.embedding import chinese; "
         "print(' '.join(chinese.words('我买了洗衣机')))"],
        env={**os.environ, "TMPDIR": str(tmp_path)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert cut.stdout.strip() == "我 买 了 洗衣机", cut.stderr

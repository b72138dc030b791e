"""Japanese cutting: SudachiPy's words (normalised, without particles) beside the bigrams for
`japanese`, and for `auto` on a text with kana; a span with Hangul keeps bigrams only."""

from __future__ import annotations

import threading
from importlib.metadata import version

import pytest

from shared.embedding import japanese
from shared.embedding.bm25 import _prepared, document_terms, query_terms
from shared.embedding.cjk import MAX_WORD_CHARS


def test_words_are_normalised_and_particles_are_left_out() -> None:
    assert japanese.words("山田さんと浅草の雷門で抹茶アイスを食べました") == [
        "山田", "さん", "浅草", "雷門", "抹茶", "アイス", "食べる",
    ]  # fmt: skip
    assert japanese.words("ﾔﾏﾀﾞ") == ["ヤマダ"]


@pytest.mark.parametrize(
    ("text", "language", "cut"),
    [("誰と歌った？", "japanese", " 誰 歌う 誰と と歌 歌っ った ?"),
     ("誰と歌った？", "auto", " 誰 歌う 誰と と歌 歌っ った ?"),
     ("誰と歌った？", "korean", " 誰と と歌 歌っ った ?"),
     ("誰と歌った？", "english", "誰と歌った？"),
     # `japanese` reads kanji alone as Japanese too; `auto` cannot tell it from Chinese
     ("浅草", "japanese", " 浅草 浅草 "), ("浅草", "auto", " 浅草 浅草 "),
     # a span with Hangul is Korean: bigrams only, even for `japanese`
     ("서울 에서", "japanese", " 서울 에서 "),
     ("I love 東京タワー!", "japanese", "I love  東京 タワー 東京 京タ タワ ワー !")],
)  # fmt: skip
def test_each_language_cuts_japanese_as_it_ships(text: str, language: str, cut: str) -> None:
    assert _prepared(text, language) == cut


def test_a_verb_in_another_form_is_one_term_of_the_question_and_of_the_chunk() -> None:
    # 歌った (asked) and 歌いました (said) share no bigram; both are SudachiPy's 歌う
    said = set(document_terms("友達とカラオケで歌いました。", "japanese").indices)
    assert set(query_terms("誰と歌った？", "japanese").indices) & said
    bigrams = set(document_terms("友達とカラオケで歌いました。", "korean").indices)
    assert not set(query_terms("誰と歌った？", "korean").indices) & bigrams


def test_threads_cutting_at_once_get_the_same_words() -> None:
    # one SudachiPy tokenizer shared by threads refused the second ("Tokenizer is already in
    # use"): the API's recalls and a worker's flushes cut in several threads at once
    text = "昨日、山田さんと浅草の雷門で抹茶アイスを食べました。" * 20
    expected = _prepared(text, "japanese")
    failures: list[BaseException] = []
    cuts: list[str] = []

    def cut() -> None:
        try:
            cuts.extend(_prepared(text, "japanese") for _ in range(50))
        except BaseException as exc:  # any failure of a thread is the test's
            failures.append(exc)

    threads = [threading.Thread(target=cut) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert failures == [] and cuts == [expected] * 400


def test_a_long_text_is_read_up_to_max_word_chars_and_bigrams_cover_all_of_it() -> None:
    # SudachiPy refuses more than 49,149 bytes at once; Han beyond the BMP is 4 bytes each
    text = "𠮷野家で食べた。" * 10_000 + "尾巴" + "𠮷" * 50_000
    cut = _prepared(text, "japanese")
    assert " 食べる " in cut and " 尾巴 " in cut
    assert isinstance(japanese.words("𠮷" * MAX_WORD_CHARS), list)  # 32,000 bytes: read
    assert query_terms("尾巴", "korean").indices[0] in document_terms(text, "japanese").indices


@pytest.mark.parametrize(
    ("package", "pinned"),
    [("sudachipy", japanese.SUDACHIPY_VERSION), ("sudachidict-small", japanese.DICTIONARY_VERSION)],
)
def test_the_recorded_encoding_names_the_installed_versions(package: str, pinned: str) -> None:
    # another SudachiPy or dictionary may cut other words: the encoding must name what is
    # installed, so a collection termed by another is termed again by the backfill
    assert version(package) == pinned

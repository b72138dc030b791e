"""Real word segmenters against the character bigrams of shared/embedding/cjk.py, for
bench/quality_cjk: jieba (Chinese), SudachiPy (Japanese) and kiwipiepy (Korean), each imported
only when asked for, so the bench runs without them.

A text (a chunk or a query) is given a language by its script, as `language: auto` would do per
chunk: Hangul is Korean, kana Japanese, Han alone Chinese. A segmenter cuts the CJK runs of the
texts of its language into words (runs with only spaces between them at once, as a sentence);
the runs of any other language keep their bigrams, so one collection holds all three and each
language's rows compare its segmenter with bigrams. The words are what a search engine's
analyzer keeps: Japanese in SudachiPy's normalised form (食べました -> 食べる) without
particles, auxiliary verbs and symbols; Korean morphemes without particles, endings, copulas
and symbols (as Elasticsearch nori's default stop tags); Chinese all of jieba's words.
`+bigrams` adds the runs' bigrams to their words; `trigrams` (no dictionary) adds every run's
character trigrams to its bigrams. Every variant reads the text in NFKC, as shipped.

`jieba+sudachi+bigrams` is what memory-pool ships for `auto` (jieba's words for Chinese,
SudachiPy's with its small dictionary for Japanese, bigrams for Korean): it is not rebuilt here
but made by shared/embedding/bm25.py itself (shared/embedding/chinese.py, japanese.py).
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache

from shared.embedding import bm25, chinese
from shared.embedding.cjk import _CJK_RUN, _SPAN, _bigrams

Cutter = Callable[[str], list[str]]

# What memory-pool ships for language auto: terms made by shared/embedding/bm25.py unpatched.
SHIPPED = "jieba+sudachi+bigrams"

_KANA = re.compile("[\u3041-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
_HANGUL = re.compile("[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]")
# SudachiPy's first part-of-speech field / kiwipiepy's tags (prefixes) left out of the words.
_SUDACHI_DROP = frozenset({"助詞", "助動詞", "補助記号", "空白"})
_KIWI_DROP = ("J", "E", "VCP", "VCN", "SF", "SP", "SS", "SE", "SO", "SW", "Z", "UN", "W_")


def script_language(text: str) -> str:
    """chinese, japanese or korean, by the script of the text's CJK characters."""
    if _HANGUL.search(text):
        return "korean"
    return "japanese" if _KANA.search(text) else "chinese"


@cache
def _sudachi() -> Cutter:
    from sudachipy import Dictionary, SplitMode

    # SUDACHI_DICT=small|core|full: which SudachiDict package (default: small, as shipped; the
    # others are installed by hand)
    tokenizer = Dictionary(dict=os.environ.get("SUDACHI_DICT", "small")).tokenizer(SplitMode.C)

    def cut(run: str) -> list[str]:
        return [
            m.normalized_form()
            for m in tokenizer.tokenize(run)
            if m.part_of_speech()[0] not in _SUDACHI_DROP
        ]

    return cut


@cache
def _kiwi() -> Cutter:
    from kiwipiepy import Kiwi

    kiwi = Kiwi()
    return lambda run: [t.form for t in kiwi.tokenize(run) if not t.tag.startswith(_KIWI_DROP)]


LOADERS: dict[str, Callable[[], Cutter]] = {
    "chinese": chinese.load,
    "japanese": _sudachi,
    "korean": _kiwi,
}
# A segmenter's name: the languages whose runs it cuts into words.
SEGMENTERS: dict[str, tuple[str, ...]] = {
    "bigrams": (),
    "trigrams": (),
    "jieba": ("chinese",),
    "sudachi": ("japanese",),
    "jieba+sudachi": ("chinese", "japanese"),
    "kiwi": ("korean",),
    "words": ("chinese", "japanese", "korean"),
}


def parse(names: str) -> list[str]:
    """The segmenters of a comma-separated list (each also with `+bigrams`), checked."""
    out = [name.strip() for name in names.split(",") if name.strip()]
    for name in out:
        if name.removesuffix("+bigrams") not in SEGMENTERS:
            known = ", ".join(SEGMENTERS)
            raise SystemExit(f"unknown segmenter {name!r} (known: {known}, each also +bigrams)")
    return out


def languages_of(name: str) -> tuple[str, ...]:
    return SEGMENTERS[name.removesuffix("+bigrams")]


def load(name: str) -> None:
    """Import and build the segmenter's dictionaries (what a worker would pay once)."""
    for language in languages_of(name):
        LOADERS[language]()


def _trigrams(run: str) -> str:
    return " ".join(run[i : i + 3] for i in range(len(run) - 2))


def segmenting(name: str) -> Callable[[str], str]:
    """A replacement for shared.embedding.cjk.segmented that cuts with this segmenter."""
    languages = languages_of(name)
    also_bigrams = name.endswith("+bigrams")

    def ngrams(match: re.Match[str]) -> str:
        run = match.group()
        return f" {_bigrams(run)} {_trigrams(run) if name == 'trigrams' else ''} "

    def segmented(text: str) -> str:
        text = unicodedata.normalize("NFKC", text)
        language = script_language(text)
        if language not in languages:
            return _CJK_RUN.sub(ngrams, text)
        cut = LOADERS[language]()

        def words(match: re.Match[str]) -> str:
            span = match.group()
            runs = _CJK_RUN.findall(span) if also_bigrams else []
            return f" {' '.join([*cut(span), *map(_bigrams, runs)])} "

        return _SPAN.sub(words, text)

    return segmented


@contextmanager
def segmenter(name: str) -> Iterator[None]:
    """BM25 terms (documents and queries) made with this segmenter inside the block: the
    shipped one by bm25 as it is, any other by replacing what bm25 makes of a CJK language's
    text."""
    load(name)
    if name == SHIPPED:
        yield
        return
    cutting = segmenting(name)
    original = bm25._prepared

    def prepared(text: str, language: str) -> str:
        return cutting(text) if bm25.cuts_cjk(language) else text

    bm25._prepared = prepared
    try:
        yield
    finally:
        bm25._prepared = original

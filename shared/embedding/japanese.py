"""SudachiPy's Japanese words (mode C, normalised forms), with its small dictionary.

Measured against bigrams alone on bench/quality_cjk (BENCHMARKS.md, sections 15.1 and 15.2):
words + bigrams found 16 questions more and lost none with questions in the facts' words, and
the small dictionary finds exactly what the core one does at 110 MB instead of 193. SudachiPy
is Rust: its dictionary is mapped, not read (0.02 s, ~35 MB), so it loads on first use, without
a warm-up, and 8,000 characters take ~10 ms.

The words are what a search engine's Japanese analyzer keeps: normalised (食べました -> 食べる,
ﾔﾏﾀﾞ -> ヤマダ), without particles, auxiliary verbs, symbols and spaces, which are most of a
sentence's tokens and say nothing of what it is about.
"""

from __future__ import annotations

import threading
from typing import Any

# The languages whose Japanese text is cut into SudachiPy's words (shared/embedding/bm25.py):
# `japanese` always, `auto` for a text with kana.
WORD_LANGUAGES = frozenset({"japanese", "auto"})
# What a collection records (bm25.encoding_of): another SudachiPy or dictionary may cut other
# words, so a change of either pin re-terms these collections (a test holds them to pyproject).
SUDACHIPY_VERSION = "0.7.0"
DICTIONARY_VERSION = "20261015"
ENCODING = f"+sudachi-{SUDACHIPY_VERSION}-small-{DICTIONARY_VERSION}"
# SudachiPy's first part-of-speech field of the tokens left out.
_DROPPED = frozenset({"助詞", "助動詞", "補助記号", "空白"})

_lock = threading.Lock()
_dictionary: Any = None
# A SudachiPy tokenizer refuses to be used by two threads at once ("Tokenizer is already in
# use"): one per thread, all reading the one mapped dictionary.
_local = threading.local()


def _tokenizer() -> Any:
    tokenizer = getattr(_local, "tokenizer", None)
    if tokenizer is None:
        global _dictionary
        with _lock:
            if _dictionary is None:
                from sudachipy import Dictionary

                _dictionary = Dictionary(dict="small")
            tokenizer = _dictionary.tokenizer("C", fields={"pos", "normalized_form"})
        _local.tokenizer = tokenizer
    return tokenizer


def words(span: str) -> list[str]:
    """SudachiPy's content words of a span of Japanese, normalised. SudachiPy refuses more than
    49,149 bytes at once: cjk.MAX_WORD_CHARS (8,000 characters, at most 4 bytes each) keeps a
    span below it."""
    return [
        word
        for morpheme in _tokenizer().tokenize(span)
        if morpheme.part_of_speech()[0] not in _DROPPED and (word := morpheme.normalized_form())
    ]

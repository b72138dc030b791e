"""Chinese, Japanese and Korean runs cut into overlapping character bigrams before BM25.

fastembed's tokenizer splits on spaces and punctuation only, so a CJK sentence is one or two
"words" and a name inside it is never a term of its own. Bigrams need no dictionary, give the
same terms for the same text on every machine, and make any two-character name (雷門, 山田,
서울) a term; a longer name is a run of its bigrams, which BM25 sums. Latin runs are left as
they are for the Snowball stemmer.

Chinese (languages `chinese`, and `auto` for a text without kana or Hangul) also gets jieba's
words (shared/embedding/chinese.py) beside the bigrams: a run of Han with only spaces between
goes to jieba whole, and its words and its runs' bigrams are all terms. Japanese (`japanese`,
and `auto` for a text with kana and no Hangul) gets SudachiPy's words the same way
(shared/embedding/japanese.py), for any span without Hangul. On bench/quality_cjk both find
more than bigrams alone (BENCHMARKS.md, sections 15.1 and 15.2); Korean keeps bigrams only.

The text is read in NFKC first, so a word is the same terms however it was typed: full-width
Latin and digits (ＮＨＫ, ２０２４, as Japanese input methods type them) as ASCII, half-width
katakana (ﾔﾏﾀﾞ) as full-width, decomposed kana and Hangul (macOS may paste them so) composed.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

# Han (the iteration and closing marks 々 〆 〇 〻, extension A, compatibility ideographs, and
# the planes beyond the BMP: 𠮷), hiragana, katakana (with the half-width forms and the
# prolonged sound mark), Hangul syllables and jamo.
_CJK_RUN = re.compile(
    "[\u3005-\u3007\u303b\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\U00020000-\U0003134f"
    "\u3041-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
    "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]+"
)

# CJK runs with the spaces between them: a segmenter reads a sentence better whole.
_SPAN = re.compile(f"{_CJK_RUN.pattern}(?:[ \t]+{_CJK_RUN.pattern})*")
_KANA = re.compile("[\u3041-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
_HANGUL = re.compile("[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]")

Words = Callable[[str], list[str]]
Reads = Callable[[str], bool]
# The characters of a text a word cutter reads (its first spans; the rest keeps its bigrams).
# SudachiPy refuses more than 49,149 bytes at once (8,000 characters are at most 32,000).
# jieba is pure Python and holds the GIL: a chunk of 1,000,000 characters of Han (the per-message
# limit) took 11.5 s, 8,000 (the default MEMORY_POOL_MAX_QUERY_CHARS, so a query is read whole)
# 30 to 120 ms; a worker's other flushes, and the API's recalls during a Qdrant-API upsert, wait.
MAX_WORD_CHARS = 8000


def has_cjk(text: str) -> bool:
    return _CJK_RUN.search(text) is not None


def _bigrams(run: str) -> str:
    if len(run) == 1:
        return run
    return " ".join(run[i : i + 2] for i in range(len(run) - 1))


def chinese_script(text: str) -> bool:
    """Whether the text's CJK characters are Han alone (no kana, no Hangul): Chinese."""
    return _KANA.search(text) is None and _HANGUL.search(text) is None


def japanese_script(text: str) -> bool:
    """Whether the text has kana and no Hangul: Japanese (`auto` cuts it with SudachiPy)."""
    return _KANA.search(text) is not None and _HANGUL.search(text) is None


def without_hangul(text: str) -> bool:
    """A span SudachiPy reads (Japanese may be kanji alone); a Korean one keeps bigrams."""
    return _HANGUL.search(text) is None


def segmented(text: str, words: Words | None = None, reads: Reads = chinese_script) -> str:
    """The text in NFKC, every CJK run replaced by its bigrams, spaced apart from what is
    around; with `words`, a span that `reads` accepts (by default Han alone) also by its words,
    the others keep bigrams only."""
    text = unicodedata.normalize("NFKC", text)
    if words is None:
        return _CJK_RUN.sub(lambda m: f" {_bigrams(m.group())} ", text)
    left = [MAX_WORD_CHARS]  # what the word cutter may still read of this text

    def cut(span: str) -> str:
        return f" {' '.join(_words_and_bigrams(span, words, reads, left))} "

    return _SPAN.sub(lambda m: cut(m.group()), text)


def _words_and_bigrams(span: str, words: Words, reads: Reads, left: list[int]) -> list[str]:
    runs = [_bigrams(run) for run in _CJK_RUN.findall(span)]
    if not reads(span) or left[0] <= 0:
        return runs
    read = span[: left[0]]
    left[0] -= len(read)
    return [*words(read), *runs]

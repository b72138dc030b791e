"""jieba's Chinese words, with its dictionary loaded once per process (1.1-8 s, ~70 MB).

jieba is imported on first use only, so a deployment without a Chinese or `auto` agent never
loads it. `warm_in_background` loads it at an API's or a worker's start; a text cut before the
load is done waits for it (a query cut without words would miss what its documents hold).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterable
from typing import Any

# The languages whose Han text is cut into jieba's words (shared/embedding/bm25.py).
WORD_LANGUAGES = frozenset({"chinese", "auto"})
# Above CRITICAL: jieba's "Building prefix dict..." lines never reach stderr.
_QUIET = 60

_lock = threading.Lock()
_cut: Callable[[str], list[str]] | None = None


def _load() -> Callable[[str], list[str]]:
    with warnings.catch_warnings():  # its regexes' escapes warn when first compiled
        warnings.simplefilter("ignore")
        import jieba
    jieba.setLogLevel(_QUIET)
    _initialize(jieba.dt)
    return lambda run: [word for word in jieba.cut(run) if word.strip()]


def _initialize(tokenizer: Any) -> None:
    """jieba's `initialize` built from its own dictionary file, never read from the cache it
    keeps in the temp dir: any user, or another jieba's version, may have left a `jieba.cache`
    there (one of another shape failed every cut, a made-up one changed the words). ~0.6 s more
    than from the cache, once per process and in the warm-up's thread."""
    with tokenizer.lock:
        tokenizer.FREQ, tokenizer.total = tokenizer.gen_pfdict(tokenizer.get_dict_file())
        tokenizer.initialized = True


def load() -> Callable[[str], list[str]]:
    """jieba's cutter, its dictionary loaded by the first caller; the others wait for it."""
    global _cut
    with _lock:
        if _cut is None:
            _cut = _load()
        return _cut


def words(run: str) -> list[str]:
    """jieba's words of a run of Chinese (precise mode, every word, spaces left out)."""
    return load()(run)


def needed(languages: Iterable[str]) -> bool:
    return any(language.lower() in WORD_LANGUAGES for language in languages)


def warm_in_background(languages: Iterable[str]) -> threading.Thread | None:
    """Load the dictionary in a daemon thread if any of these languages cuts Chinese words."""
    if not needed(languages):
        return None
    thread = threading.Thread(target=load, name="jieba-warm-up", daemon=True)
    thread.start()
    return thread

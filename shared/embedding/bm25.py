"""BM25 term weights of a text (fastembed's `Qdrant/bm25`), offline, one encoder per language.

Documents and queries go through the same tokenizer, stopwords and stemmer; only the weights
differ (a document's term frequencies, a query's ones). IDF is Qdrant's (`modifier: idf`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from fastembed.sparse.bm25 import Bm25, supported_languages
from fastembed.sparse.sparse_embedding_base import SparseEmbedding

from shared.embedding import chinese, japanese
from shared.embedding.cjk import chinese_script, japanese_script, segmented, without_hangul

# The named sparse vector beside st-qdrant-memory's unnamed dense one.
VECTOR_NAME = "bm25"
# Changing how terms are made (this version, or an agent's language) changes their hashes:
# a collection recorded with other settings is backfilled again.
ENCODING_VERSION = 1
DEFAULT_LANGUAGE = "english"
# Languages whose CJK runs are cut into bigrams (shared/embedding/cjk.py); chinese, and auto for
# a text of Han alone, also into jieba's words (shared/embedding/chinese.py); japanese, and auto
# for a text with kana, into SudachiPy's (shared/embedding/japanese.py). Their Latin runs
# are stemmed as English, the language most often mixed into their chats. Any other language
# leaves CJK text uncut, as before, so its collections keep their terms.
CJK_LANGUAGES = frozenset({"chinese", "japanese", "korean", "auto"})
CJK_STEMMER = "english"
# The BM25 score (Qdrant's IDF x fastembed's term weight, summed over the query's terms) a
# point needs to come from the lexical leg; measured on bench/quality (BENCHMARKS.md).
DEFAULT_LEXICAL_THRESHOLD = 5.0
# A query's BM25 score is a sum over its distinct terms of IDF (at most ~20) times a term
# weight (at most k + 1 = 2.2): even 8,000 characters of query stay far below this, so it
# already admits nothing. Beyond float32 (Qdrant's scores) a threshold would overflow, and
# an infinite one reaches a server as `null`, i.e. no threshold at all: both are refused.
MAX_LEXICAL_THRESHOLD = 1_000_000.0
# How much the lexical leg counts in the fusion: dense + w x lexical after each leg's
# normalisation (README "Hybrid recall"); chosen on bench/quality (BENCHMARKS.md, section 12).
DEFAULT_LEXICAL_WEIGHT = 2.0
# Beyond 10 the dense leg only breaks ties between lexical matches; 0 keeps the dense order.
MAX_LEXICAL_WEIGHT = 10.0
# fastembed reads `<language>.txt` stopwords from the model folder; shipping the folder keeps it
# from downloading the Qdrant/bm25 repository. Languages without a file get no stopwords
# (Qdrant's IDF still weighs common words down).
MODEL_FOLDER = Path(__file__).with_name("bm25_model")


@dataclass(frozen=True, slots=True)
class Terms:
    """A sparse vector: term hashes and their weights, in the same order."""

    indices: tuple[int, ...]
    values: tuple[float, ...]

    def __bool__(self) -> bool:
        return bool(self.indices)


def cuts_cjk(language: str) -> bool:
    """Whether this language's terms cut CJK runs into bigrams."""
    return language.lower() in CJK_LANGUAGES


def _stemmer(language: str) -> str:
    """The Snowball stemmer of a language's Latin runs, or "none"."""
    lang = CJK_STEMMER if cuts_cjk(language) else language.lower()
    return lang if lang in supported_languages else "none"


def known_language(language: str) -> bool:
    """Whether Snowball stems this language's Latin runs; any other is tokenized unstemmed."""
    return _stemmer(language) != "none"


def encoding_of(language: str) -> str:
    """What a collection records: terms made by another encoding must be made again. CJK
    languages read the text in NFKC (cjk.py); their first encoding, "+cjk-bigrams", did not, so
    a collection recorded with it is termed again by the backfill. chinese and auto add jieba's
    words (its version pinned), japanese and auto SudachiPy's (its and its dictionary's): their
    collections recorded before are termed again."""
    lang = language.lower()
    cut = "+nfkc-cjk-bigrams" if cuts_cjk(language) else ""
    cut += "+jieba-0.42.1" if lang in chinese.WORD_LANGUAGES else ""
    cut += japanese.ENCODING if lang in japanese.WORD_LANGUAGES else ""
    return f"v{ENCODING_VERSION}:{_stemmer(language)}{cut}"


_lock = threading.Lock()


@lru_cache(maxsize=16)
def _encoder(stemmer: str) -> Bm25:
    if stemmer != "none":
        return Bm25("Qdrant/bm25", language=stemmer, specific_model_path=str(MODEL_FOLDER))
    return Bm25("Qdrant/bm25", disable_stemmer=True, specific_model_path=str(MODEL_FOLDER))


def encoder(language: str) -> Bm25:
    with _lock:  # lru_cache may build one twice under threads; building is cheap but not free
        return _encoder(_stemmer(language))


def _prepared(text: str, language: str) -> str:
    """The text as the tokenizer reads it: `auto` chooses per text by its script."""
    lang = language.lower()
    if lang == "chinese" or (lang == "auto" and chinese_script(text)):
        return segmented(text, chinese.words)
    if lang == "japanese" or (lang == "auto" and japanese_script(text)):
        return segmented(text, japanese.words, reads=without_hangul)
    return segmented(text) if cuts_cjk(language) else text


def _terms(embedding: SparseEmbedding) -> Terms:
    indices = tuple(int(i) for i in embedding.indices)
    return Terms(indices, tuple(float(v) for v in embedding.values))


def document_terms(text: str, language: str = DEFAULT_LANGUAGE) -> Terms:
    """A chunk's BM25 term weights (term frequency, length-normalised)."""
    (embedding,) = encoder(language).raw_embed([_prepared(text, language)])
    return _terms(embedding)


def documents_terms(texts: list[str], language: str = DEFAULT_LANGUAGE) -> list[Terms]:
    return [
        _terms(embedding)
        for embedding in encoder(language).raw_embed([_prepared(text, language) for text in texts])
    ]


def query_terms(text: str, language: str = DEFAULT_LANGUAGE) -> Terms:
    """A query's terms, each weighted 1: Qdrant's IDF times the document weight is BM25."""
    (embedding,) = encoder(language).query_embed(_prepared(text, language))
    return _terms(embedding)

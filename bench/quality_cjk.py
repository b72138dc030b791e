"""Recall quality on Chinese, Japanese and Korean (bench/quality_cjk_data): dense alone vs hybrid
with the CJK terms (language auto) vs hybrid with the old uncut terms (language english), in
the same run and with the default English embedding model; then the cost of the terms.

Run: .venv/bin/python -m bench.quality_cjk
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from bench.quality import AGENT, load, score
from bench.quality_cjk_data import build
from bench.stats import table
from shared.embedding.bm25 import documents_terms
from shared.format.chunking import cut
from shared.format.payload import chunk_text

MODES: list[tuple[str, str, dict[str, Any]]] = [
    ("dense", "auto", {"mode": "dense"}),
    ("hybrid, CJK bigrams (auto)", "auto", {"mode": "hybrid"}),
    ("hybrid, uncut terms (english)", "english", {"mode": "hybrid"}),
]


def terming_cost(texts: list[str], language: str) -> float:
    """Milliseconds to term 1,000 chunks (the best of three passes, encoder already built)."""
    documents_terms(texts[:1], language)
    best = min(_timed(texts, language) for _ in range(3))
    return best / len(texts) * 1000 * 1000


def _timed(texts: list[str], language: str) -> float:
    started = time.perf_counter()
    documents_terms(texts, language)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__).parse_args(argv)
    data = build()
    print(f"{sum(len(s) for s in data.sessions)} messages, {len(data.questions)} questions")
    out = []
    for label, language, mode in MODES:
        agent = AGENT.model_copy(update={"language": language})
        store, cache, count = load(data, agent)
        result = score(data, store, cache, agent, **mode)
        for kind in ("all", "chinese", "japanese", "korean"):
            hit, full, chars, n = result[kind]
            out.append([label, kind, n, f"{hit:.2f}", f"{full:.2f}", f"{chars:.0f}"])
    print(f"{count} chunks")
    print(table(["recall", "questions", "n", "hit@5", "full@5", "context chars"], out))
    chunks = [c for s in data.sessions for c in cut(s, AGENT.rules).closed]
    texts = [chunk_text(c) for c in chunks]
    for language in ("english", "auto"):
        print(f"terms of 1,000 chunks, language {language}: {terming_cost(texts, language):.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

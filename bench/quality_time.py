"""Recall quality on time-bound questions ("what did we cook last weekend?"), time words off and
on in the same run, as the Discord plugin asks (limit 5, threshold 0.3, context excluded):
top-1 (the right dated chunk first), hit@5, the median recall time (local mode, query vectors
cached); and what reading the time words costs a query.

Run: .venv/bin/python -m bench.quality_time
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from typing import Any

from api.recall.lexical import LexicalCollections
from api.recall.query_cache import QueryCache
from api.recall.query_filter import RecallFilters
from api.recall.request import RecallRequest
from api.recall.service import recall
from api.recall.time_words import find_window
from bench.quality import AGENT, load
from bench.quality_data import ConversationSet
from bench.quality_data import build as build_plain
from bench.quality_time_data import NOW, build
from bench.stats import table
from shared.format.payload import message_ids_of
from shared.store.interface import Store


class StrippedQueryCache(QueryCache):
    """Embeds the query without its time words: the alternative to embedding it whole."""

    def vector(self, text: str) -> list[float]:
        window = find_window(text, NOW)
        return super().vector(window.rest if window and window.rest else text)


def score(
    data: ConversationSet, store: Store, cache: QueryCache, threshold: float, **mode: Any
) -> dict[str, Any]:
    lexical = LexicalCollections(store)
    base = RecallRequest("", frozenset(data.recent_ids), 5, threshold, RecallFilters(), now=NOW)
    rows: dict[str, list[tuple[bool, bool]]] = {}
    took = []
    for q in data.questions:
        started = time.perf_counter()
        found = recall(AGENT, replace(base, query_text=q.text, **mode), store=store, cache=cache,
                       lexical=lexical)  # fmt: skip
        took.append((time.perf_counter() - started) * 1000)
        ids = [message_ids_of(h.payload) for h in found.hits]
        first = bool(ids) and bool(q.evidence & ids[0])
        hit = any(q.evidence & i for i in ids)
        for kind in (q.kind, "all"):
            rows.setdefault(kind, []).append((first, hit))
    scores: dict[str, Any] = {
        kind: (sum(f for f, _ in r) / len(r), sum(h for _, h in r) / len(r), len(r))
        for kind, r in rows.items()
    }
    return scores | {"ms": statistics.median(took)}


MODES: list[tuple[str, str, dict[str, Any]]] = [
    ("dense", "off", {"mode": "dense", "time_words": False}),
    ("dense", "on", {"mode": "dense", "time_words": True}),
    ("hybrid", "off", {"mode": "hybrid", "time_words": False}),
    ("hybrid", "on (default)", {"mode": "hybrid", "time_words": True}),
]


def cost(texts: list[str], rounds: int = 200) -> tuple[float, float]:
    """Median microseconds of find_window per query, for queries with and without time words."""
    timed: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):
        for text in texts:
            started = time.perf_counter()
            found = find_window(text, NOW)
            timed[found is not None].append((time.perf_counter() - started) * 1e6)
    return statistics.median(timed[True]), statistics.median(timed[False])


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__).parse_args(argv)
    data = build()
    store, cache, count = load(data)
    stripped = StrippedQueryCache(cache.embedder)
    print(f"{count} chunks, {len(data.questions)} time-bound questions")
    out = []
    runs = [(r, w, cache, m) for r, w, m in MODES] + [
        ("hybrid", "on, out of the dense text too", stripped, MODES[-1][2])
    ]
    for warm in (cache, stripped):  # every query embedded once before anything is timed
        score(data, store, warm, 0.3, mode="hybrid")
    # 0.3: the Discord plugin's threshold; 0: no cosine floor, the window's ranking alone
    for threshold in (0.3, 0.0):
        for recall_mode, words, used, mode in runs:
            result = score(data, store, used, threshold, **mode)
            out.append([recall_mode, words, f"{threshold:g}", f"{result['all'][0]:.2f}",
                        f"{result['all'][1]:.2f}", f"{result['shared words'][0]:.2f}",
                        f"{result['paraphrase'][0]:.2f}", f"{result['ms']:.1f}"])  # fmt: skip
    print(table(["recall", "time words", "threshold", "top-1", "hit@5", "top-1 shared words",
                 "top-1 paraphrase", "recall ms (median)"], out))  # fmt: skip
    plain = [q.text for q in build_plain().questions]
    with_words, without = cost([q.text for q in data.questions] + plain)
    print(f"find_window per query: {with_words:.0f} us with time words, {without:.1f} us without "
          f"({len(plain)} questions without, of bench.quality)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

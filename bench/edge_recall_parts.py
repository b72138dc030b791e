"""The parts of a hybrid /retrieve on Qdrant Edge, in process: the dense query alone (what
`bench.retrieve_serve` calls "bare"), the fused dense + BM25 query /retrieve sends by default
(at the default lexical weight: both legs, fused in memory-pool), and the cosine request that
follows it. With the Discord plugin's 30 exclusions.

Run: .venv/bin/python -m bench.edge_recall_parts --size 50000 --dims 3072
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from api.recall.query_filter import RecallFilters, recall_filter
from bench.machine import describe
from bench.recall_embedded import _queries
from bench.retrieve_serve import COLLECTION, fill_edge
from bench.stats import median, pct, table
from shared.embedding.bm25 import DEFAULT_LEXICAL_WEIGHT, query_terms
from shared.store.edge.engine import EdgeStore
from shared.store.interface import FusedQuery


def _timed(asks: list[tuple[list[float], list[str]]], call: Callable[..., object]) -> list[float]:
    took = []
    for vector, excluded in asks:
        started = time.perf_counter()
        call(vector, recall_filter(RecallFilters(), excluded))
        took.append((time.perf_counter() - started) * 1000)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=50_000)
    parser.add_argument("--dims", type=int, default=3072)
    parser.add_argument("--samples", type=int, default=100)
    args = parser.parse_args()
    print(describe(), flush=True)
    with tempfile.TemporaryDirectory(prefix="mp-parts-") as folder:
        data = Path(folder)
        fill_edge(data, args.size, args.dims)
        store = EdgeStore(data / "edge", optimize_in_background=False)
        try:
            asks = _queries(args.dims, args.size, args.samples)
            terms = query_terms("do you remember the river and the lighthouse", "english")
            dense = _timed(asks, lambda v, f: store.query(
                COLLECTION, v, limit=20, score_threshold=0.0, query_filter=f))  # fmt: skip
            weight = DEFAULT_LEXICAL_WEIGHT
            fused = _timed(asks, lambda v, f: store.fused_query(
                COLLECTION, FusedQuery(v, terms, 20, 0.0, f, 0.0, "dbsf", weight)))  # fmt: skip
            first = FusedQuery(asks[0][0], terms, 20, 0.0, None, 0.0, "dbsf", weight)
            some = [p.id for p in store.fused_query(COLLECTION, first)]
            cosines = _timed(asks, lambda v, f: store.cosines(COLLECTION, some, v))
        finally:
            store.close()
    parts = (("dense query", dense), ("fused query", fused), ("cosines of 40", cosines))
    rows = [[name, median(t), pct(t, 95)] for name, t in parts]
    print(f"{args.size // 1000}k x {args.dims}")
    print(table(["Edge call", "p50 ms", "p95 ms"], rows))


if __name__ == "__main__":
    main()

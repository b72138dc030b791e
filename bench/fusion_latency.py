"""Fusion weights' cost: hybrid recall at the default lexical weight (2: the legs fused in
memory-pool from one batch request, the dense leg's cosines reused) against equal weights (1:
Qdrant's own DBSF plus a cosine request) and weighted RRF (in the store), interleaved in the
same run, on Qdrant Edge (serve's engine) and on the REST test server.

Run: .venv/bin/python -m bench.fusion_latency [--sizes 10000] [--samples 200]

Recall is timed through api.recall.recall (what /retrieve runs, without HTTP), the query
embedding cached beforehand; the plugin's 30 excluded ids are in every query.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from qdrant_client import QdrantClient

from api.recall.request import RecallRequest
from bench.machine import describe
from bench.recall_hybrid import DIMS, NAME, RandomEmbedder, Variant, fill_to, time_variants
from bench.stats import median, pct, ratio, table
from shared.store.edge.engine import EdgeStore
from shared.store.interface import Store
from shared.store.qdrant.engine import QdrantStore
from tests.support.qdrant_server import QdrantTestServer


def _fused(fusion: str, weight: float) -> Callable[[RecallRequest], RecallRequest]:
    return lambda base: replace(base, mode="hybrid", fusion=fusion, lexical_weight=weight)  # type: ignore[arg-type]


# the first is the baseline of the ratios
VARIANTS: list[Variant] = [
    ("dbsf w=1", _fused("dbsf", 1.0)),
    ("dbsf w=2 (default)", _fused("dbsf", 2.0)),
    ("rrf w=2", _fused("rrf", 2.0)),
]


@contextmanager
def stores() -> Iterator[dict[str, Store]]:
    with tempfile.TemporaryDirectory() as folder, QdrantTestServer(Path(folder) / "q") as server:
        rest = QdrantStore(
            QdrantClient(url=server.url, prefer_grpc=False, timeout=120, check_compatibility=False),
            local=False,
        )
        edge = EdgeStore(Path(folder) / "edge")
        try:
            yield {"Qdrant Edge": edge, "REST test server": rest}
        finally:
            rest.close()
            edge.close()


def rows(sizes: list[int], samples: int) -> list[list[Any]]:
    found = []
    with stores() as by_kind:
        for kind, store in by_kind.items():
            store.ensure_collection(NAME, size=DIMS, model=RandomEmbedder.model)
            have = 0
            for size in sizes:
                have = fill_to(store, have, size)
                if isinstance(store, EdgeStore):
                    store.optimize(NAME)  # indexed, as serve's background optimizer leaves it
                got = time_variants(store, size, samples, VARIANTS)
                base = median(got[VARIANTS[0][0]])
                for label, _ in VARIANTS:
                    took = got[label]
                    found.append([kind, size, label, len(took), median(took), pct(took, 95),
                                  ratio(median(took), base)])  # fmt: skip
                print("rows:", found[-3:], file=sys.stderr, flush=True)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args(argv)
    print(describe())
    found = rows([int(s) for s in args.sizes.split(",")], args.samples)
    print("\nHybrid recall (api.recall.recall, embedding cached, 30 exclusions), ms, same run")
    print(table(["Qdrant", "chunks", "fusion", "n", "p50", "p95", "p50 / dbsf w=1"], found))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""An import that writes every point with its BM25 terms: `import points` of N points exported
without terms (a file from another tool, or from a collection never backfilled), into a new
Qdrant Edge folder, against the same import into a collection recorded for another language,
which leaves the terms to the backfill as every import did before (the baseline, same run).

Each row: the export read from a file, imported by `import_lines` (what `memory-pool import
points` runs), then the points still lacking terms counted; the backfill's time for those is
`bench.retrieve_backfill`'s.

Run: .venv/bin/python -m bench.import_terms --size 50000 --dims 384 [--rounds 1]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from bench.machine import describe
from bench.retrieve_serve import COLLECTION, fill_edge
from bench.stack import Stack
from bench.stats import median, ratio, table
from shared.embedding.bm25 import encoding_of
from shared.embedding.embedder import make_embedder
from shared.pool.marks import RedisMarks
from shared.pool.transfer import export_lines, import_lines
from shared.settings import Settings
from shared.store import bm25_terms
from shared.store.edge.engine import EdgeStore

HEADER = ["chunks", "import", "seconds (median)", "points/s", "left without terms", "x baseline"]


def export_file(data: Path, marks: RedisMarks, out: Path) -> None:
    store = EdgeStore(data / "edge", optimize_in_background=False)
    try:
        with out.open("w") as file:
            file.writelines(export_lines(store, marks, collection=COLLECTION, agent="recall"))
    finally:
        store.close()


def import_once(
    export: Path, into: Path, marks: RedisMarks, settings: Settings, *, terms: bool
) -> tuple[float, int]:
    """Seconds of the import, and the points it left without terms."""
    store = EdgeStore(into / "edge", optimize_in_background=False)
    try:
        if not terms:  # the baseline: a collection whose terms are another language's
            store.create(COLLECTION, size=settings.embedding_dimensions or 0, model=None)
            store.record_encoding(COLLECTION, encoding_of("german"))
        with export.open() as lines:
            started = time.perf_counter()
            import_lines(lines, store=store, marks=marks, embedder=make_embedder(settings),
                         language="english")  # fmt: skip
            took = time.perf_counter() - started
        return took, bm25_terms.lacking_terms(store, COLLECTION)
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=50000)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    print(describe(), flush=True)
    with tempfile.TemporaryDirectory(prefix="mp-import-") as tmp, Stack() as stack:
        embed_url = stack.start_embedding(args.dims)
        client = redis.Redis.from_url(stack.start_redis())
        marks = RedisMarks(client)
        settings = Settings(EMBEDDING_PROVIDER="openai", EMBEDDING_BASE_URL=embed_url,
                            OPENAI_API_KEY="bench", EMBEDDING_MODEL="text-embedding-3-small",
                            EMBEDDING_DIMENSIONS=args.dims)  # fmt: skip
        source, export = Path(tmp) / "source", Path(tmp) / "pool.jsonl"
        fill_edge(source, args.size, args.dims, terms=False)
        export_file(source, marks, export)
        runs: dict[str, list[tuple[float, int]]] = {"terms left to the backfill": [],
                                                    "with terms": []}  # fmt: skip
        for r in range(args.rounds):  # interleaved: A B A B
            for name, runs_of in runs.items():
                into = Path(tmp) / f"{r}-{len(runs_of)}-{name[:4]}"
                runs_of.append(import_once(export, into, marks, settings,
                                           terms=name == "with terms"))  # fmt: skip
        client.close()
    rows: list[list[Any]] = []
    base = median([s for s, _ in runs["terms left to the backfill"]])
    for name, got in runs.items():
        seconds = median([s for s, _ in got])
        rows.append([f"{args.size // 1000}k x {args.dims}", name, seconds, args.size / seconds,
                     max(left for _, left in got), ratio(seconds, base)])  # fmt: skip
    print(table(HEADER, rows), flush=True)


if __name__ == "__main__":
    main()

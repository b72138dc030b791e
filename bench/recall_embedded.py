"""The embedded engine: serve's store on Qdrant Edge vs on qdrant-client's local mode (the
previous version), the recall query with the Discord plugin's 30 exclusions as /retrieve sends
it, Edge's bare query for the ratio, and how long indexing (optimize, which holds the GIL in
qdrant-edge-py 0.9.0) stalls the process while points are written.

Run: .venv/bin/python -m bench.recall_embedded --sizes 10000 --dims 384 --samples 200
Bulk-import stall only: .venv/bin/python -m bench.recall_embedded --bulk --sizes 10000 --dims 384
"""

from __future__ import annotations

import argparse
import itertools
import random
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import qdrant_edge as edge
from qdrant_client import QdrantClient

from api.recall.query_filter import RecallFilters, recall_filter
from bench.machine import describe
from bench.recall import _payloads
from bench.stats import median, pct, ratio, table
from bench.traffic import BASE_ID
from shared.embedding.bm25 import document_terms
from shared.format.fields import TEXT
from shared.store.edge.engine import EdgeStore
from shared.store.edge.filters import to_edge
from shared.store.edge.tuning import OPTIMIZE_EVERY_SECONDS
from shared.store.interface import PointToWrite, Store, StoredPoint
from shared.store.qdrant.engine import QdrantStore

NAME = "mem_bench"
MODEL = "bench-model"
BATCH = 256
# serve's scheduler flushes often: the background optimizer runs after every few batches
OPTIMIZE_EVERY = 1


class Ticker:
    """A thread that wants to run every 5 ms: the gaps it sees are how long the process (the
    GIL) was held by someone else, i.e. how long a /save or /retrieve would have waited."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        last = time.perf_counter()
        while not self._stop.wait(0.005):
            now = time.perf_counter()
            self.gaps.append(now - last - 0.005)
            last = now

    def __enter__(self) -> Ticker:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def _points(start: int, count: int, dims: int) -> list[PointToWrite]:
    gen = np.random.default_rng(start + dims)
    vectors = gen.standard_normal((count, dims), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    payloads = _payloads(start, count, random.Random(start))
    return [
        PointToWrite(str(uuid.UUID(int=start + i + 1)), v.tolist(), p, document_terms(p[TEXT]))
        for i, (v, p) in enumerate(zip(vectors, payloads, strict=True))
    ]


def _fill(store: Store, size: int, dims: int, optimize: Callable[[], list[float]]) -> list[float]:
    store.ensure_collection(NAME, size=dims, model=MODEL)
    runs: list[float] = []
    for n, start in enumerate(range(0, size, BATCH)):
        store.upsert(NAME, _points(start, min(BATCH, size - start), dims))
        if n % OPTIMIZE_EVERY == OPTIMIZE_EVERY - 1:
            runs += optimize()
    return runs + optimize()


def _queries(dims: int, size: int, samples: int) -> list[tuple[list[float], list[str]]]:
    gen = np.random.default_rng(7)
    rng = random.Random(7)
    out = []
    for _ in range(samples):
        v = gen.standard_normal(dims).astype(np.float32)
        excluded = [str(BASE_ID + rng.randrange(size) * 10) for _ in range(30)]
        out.append(((v / np.linalg.norm(v)).tolist(), excluded))
    return out


def _time(call: Callable[[], object], runs: int) -> list[float]:
    took = []
    for _ in range(runs):
        t = time.perf_counter()
        call()
        took.append((time.perf_counter() - t) * 1000)
    return took


def _recaller(
    store: Store,
    queries: list[tuple[list[float], list[str]]],
    during: list[float],
    stop: threading.Event,
    *,
    pause: float,
) -> threading.Thread:
    """A thread recalling as /retrieve does until `stop`, each latency (ms) into `during`."""

    def keep_recalling() -> None:
        for vector, excluded in itertools.cycle(queries):
            if stop.is_set():
                return
            flt = recall_filter(RecallFilters(), excluded)
            t = time.perf_counter()
            store.query(NAME, vector, limit=20, score_threshold=0.0, query_filter=flt)
            during.append((time.perf_counter() - t) * 1000)
            time.sleep(pause)

    return threading.Thread(target=keep_recalling, daemon=True)


def _edge_row(folder: Path, size: int, dims: int, samples: int) -> dict[str, object]:
    store = EdgeStore(folder / "edge", optimize_in_background=False)
    try:
        with Ticker() as ticker:
            fill_started = time.perf_counter()
            runs = _fill(store, size, dims, lambda: [store.optimize(NAME)])
            fill_s = time.perf_counter() - fill_started
        queries = _queries(dims, size, samples)
        it = iter(queries * 2)

        def recall() -> object:
            vector, excluded = next(it)
            flt = recall_filter(RecallFilters(), excluded)  # as /retrieve on a non-local store
            return store.query(NAME, vector, limit=20, score_threshold=0.0, query_filter=flt)

        shard = store.shards.get(NAME)
        assert shard is not None
        bare_it = iter(
            [(v, to_edge(recall_filter(RecallFilters(), excluded))) for v, excluded in queries]
        )

        def bare() -> object:
            # Edge's own query: the same filter and payload, none of memory-pool's code
            vector, flt = next(bare_it)
            request = edge.QueryRequest(
                limit=20, query=edge.Query.Nearest(vector), filter=flt, score_threshold=0.0,
                with_payload=True,
            )  # fmt: skip
            return shard.handle.query(request)

        _time(recall, 10)  # warm
        recall_ms = _time(recall, samples - 10)
        bare_ms = _time(bare, samples)
        # latency of recalls issued while a write batch and its optimize run
        during: list[float] = []
        stop = threading.Event()
        reader = _recaller(store, queries, during, stop, pause=0.0)
        reader.start()
        more: list[float] = []
        for start in range(size, size + 32 * BATCH, BATCH):
            store.upsert(NAME, _points(start, BATCH, dims))
            if (start // BATCH) % OPTIMIZE_EVERY == OPTIMIZE_EVERY - 1:
                more.append(store.optimize(NAME))
        stop.set()
        reader.join()
        return {
            "fill_s": fill_s, "optimize_ms": [r * 1000 for r in runs + more],
            "stall_ms": [g * 1000 for g in ticker.gaps], "recall": recall_ms, "bare": bare_ms,
            "during": during,
        }  # fmt: skip
    finally:
        store.close()


def _bulk_row(folder: Path, size: int, dims: int, by_writer: bool) -> dict[str, list[float]]:
    """An import as `memory-pool import points` writes it (256 points a call, as fast as it
    can) into serve's store with its background optimizer on, a thread recalling meanwhile:
    the ticker's gaps are how long a /save or /retrieve in serve would have waited."""
    store = EdgeStore(folder / "edge", optimize_by_writer=by_writer)
    try:
        store.ensure_collection(NAME, size=dims, model=MODEL)
        store.write_points(NAME, _stored(0, BATCH, dims))
        queries = _queries(dims, size, 50)
        during: list[float] = []
        stop = threading.Event()
        batches = [_stored(start, BATCH, dims) for start in range(BATCH, size, BATCH)]
        reader = _recaller(store, queries, during, stop, pause=0.01)
        with Ticker() as ticker:
            reader.start()
            started = time.perf_counter()
            for batch in batches:
                store.write_points(NAME, batch)
            write_s = time.perf_counter() - started
            time.sleep(2 * OPTIMIZE_EVERY_SECONDS + 1)  # the background optimizer's next runs
            stop.set()
            reader.join()
        return {"write_s": [write_s], "stall": [g * 1000 for g in ticker.gaps], "during": during}
    finally:
        store.close()


def _stored(start: int, count: int, dims: int) -> list[StoredPoint]:
    return [
        StoredPoint(p.id, p.payload, p.vector, (list(p.terms.indices), list(p.terms.values)))
        if p.terms is not None
        else StoredPoint(p.id, p.payload, p.vector, None)
        for p in _points(start, count, dims)
    ]


def bulk_main(sizes: list[int], dims_list: list[int], rounds: int) -> None:
    """Writer-paced indexing vs the background optimizer alone, interleaved, same run."""
    rows = []
    for size in sizes:
        for dims in dims_list:
            results: dict[bool, list[dict[str, list[float]]]] = {True: [], False: []}
            for _ in range(rounds):
                for by_writer in (False, True):
                    with tempfile.TemporaryDirectory() as folder:
                        results[by_writer].append(_bulk_row(Path(folder), size, dims, by_writer))
            for by_writer in (False, True):
                runs = results[by_writer]
                stall = [g for r in runs for g in r["stall"]]
                during = [d for r in runs for d in r["during"]]
                rows.append([
                    f"{size // 1000}k x {dims}",
                    "writer + background" if by_writer else "background only (before)",
                    median([r["write_s"][0] for r in runs]), pct(stall, 99), max(stall),
                    median(during), pct(during, 99), max(during),
                ])  # fmt: skip
            print(table(
                ["import", "indexing", "write s", "stall p99 ms", "stall max ms",
                 "recall p50 ms", "recall p99 ms", "recall max ms"],
                rows,
            ))  # fmt: skip


def _local_row(folder: Path, size: int, dims: int, samples: int) -> dict[str, object]:
    store = QdrantStore(
        QdrantClient(path=str(folder / "qdrant"), force_disable_check_same_thread=True), local=True
    )
    try:
        _fill(store, size, dims, lambda: [])
        queries = iter(_queries(dims, size, samples))

        def recall() -> object:
            vector, _ = next(queries)  # local mode: exclusions are checked on the hits only
            return store.query(NAME, vector, limit=20, score_threshold=0.0)

        return {"recall": _time(recall, samples)}
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--dims", default="384")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--local-samples", type=int, default=20)
    parser.add_argument(
        "--bulk", action="store_true",
        help="only the stall of a bulk import: writer-paced indexing vs background only",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3, help="--bulk: interleaved rounds")
    args = parser.parse_args()
    print(describe())
    if args.bulk:
        sizes = [int(s) for s in args.sizes.split(",")]
        bulk_main(sizes, [int(d) for d in args.dims.split(",")], args.rounds)
        return
    rows = []
    stalls = []
    for size in [int(s) for s in args.sizes.split(",")]:
        for dims in [int(d) for d in args.dims.split(",")]:
            with tempfile.TemporaryDirectory() as folder:
                e = _edge_row(Path(folder), size, dims, args.samples)
            with tempfile.TemporaryDirectory() as folder:
                loc = _local_row(Path(folder), size, dims, args.local_samples)
            rec, bare, dur = e["recall"], e["bare"], e["during"]
            lrec = loc["recall"]
            assert isinstance(rec, list) and isinstance(bare, list) and isinstance(dur, list)
            assert isinstance(lrec, list)
            rows.append([
                f"{size // 1000}k x {dims}", median(rec), pct(rec, 95), median(bare), pct(bare, 95),
                ratio(pct(rec, 95), pct(bare, 95)), median(lrec), pct(lrec, 95),
                ratio(median(lrec), median(rec)), median(dur), pct(dur, 99), max(dur),
            ])  # fmt: skip
            opt, stall = e["optimize_ms"], e["stall_ms"]
            assert isinstance(opt, list) and isinstance(stall, list)
            stalls.append([
                f"{size // 1000}k x {dims}", e["fill_s"], len(opt), median(opt), max(opt),
                pct(stall, 99), max(stall),
            ])  # fmt: skip
            print(table(
                ["chunks", "edge recall p50", "p95", "edge bare p50", "p95", "p95 ratio",
                 "local p50", "local p95", "local/edge p50", "during optimize p50", "p99", "max"],
                rows,
            ))  # fmt: skip
            print(table(
                ["chunks", "fill s", "optimizes", "optimize p50 ms", "max ms", "stall p99 ms",
                 "stall max ms"],
                stalls,
            ))  # fmt: skip


if __name__ == "__main__":
    main()

"""Hybrid recall's cost, against dense in the same run: recall latency (p50/p95) at 1k and 10k
chunks on local mode and on the Qdrant REST test server, the write path's extra CPU per chunk
for BM25 terms, and the backfill's throughput.

Run: .venv/bin/python -m bench.recall_hybrid [--sizes 1000,10000] [--samples 60]

Recall is timed through api.recall.recall (what /retrieve runs, without HTTP), with the query
embedding cached beforehand, so the rows compare the Qdrant side of the two modes; the plugin's
30 excluded ids are in every query.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np
import redis
from qdrant_client import QdrantClient

from api.recall.lexical import LexicalCollections
from api.recall.query_cache import QueryCache
from api.recall.query_filter import RecallFilters
from api.recall.request import RecallRequest
from api.recall.service import recall
from bench.machine import describe
from bench.stats import median, pct, ratio, table
from bench.traffic import BASE_ID, WORDS, sentence
from shared.agents import AgentConfig
from shared.embedding.bm25 import document_terms
from shared.store.interface import PointToWrite, Store
from shared.store.qdrant.engine import QdrantStore
from tests.support.qdrant_server import QdrantTestServer
from tests.support.redis_server import RedisServer
from workers.backfill import backfill
from workers.collections import CollectionGuard

DIMS = 384
AGENT = AgentConfig(name="hybridbench")
NAME = AGENT.collection_name


class RandomEmbedder:
    """Unit vectors seeded by the text: the bench times Qdrant, not a model."""

    model = "bench-random"

    def dimensions(self) -> int:
        return DIMS

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [_unit(hash(t) & 0xFFFFFFFF) for t in texts]


def _unit(seed: int) -> list[float]:
    v = np.random.default_rng(seed).standard_normal(DIMS).astype(np.float32)
    return np.round(v / np.linalg.norm(v), 4).tolist()


def _texts(start: int, count: int) -> list[str]:
    rng = random.Random(start)
    return [
        "[2024-06-10]\n" + "\n".join(f"Alex: {sentence(rng, 40, 160)}" for _ in range(4))
        for _ in range(count)
    ]


def _points(start: int, count: int, *, terms: bool) -> list[PointToWrite]:
    texts = _texts(start, count)
    return [
        PointToWrite(
            str(uuid.UUID(int=start + i + 1)),
            _unit(start + i),
            {"text": t, "messageIdList": [str(BASE_ID + (start + i) * 10)], "isChunk": True},
            document_terms(t) if terms else None,
        )
        for i, t in enumerate(texts)
    ]


@contextmanager
def stores() -> Iterator[dict[str, Store]]:
    with QdrantTestServer() as server:
        rest = QdrantStore(
            QdrantClient(url=server.url, prefer_grpc=False, timeout=120, check_compatibility=False),
            local=False,
        )
        local = QdrantStore(QdrantClient(":memory:"), local=True)
        try:
            yield {"local mode": local, "REST test server": rest}
        finally:
            rest.close()
            local.close()


# (label, what the variant asks of the base request); timed in turn on the same queries
Variant = tuple[str, Callable[[RecallRequest], RecallRequest]]
MODES: list[Variant] = [
    ("dense", lambda base: replace(base, mode="dense")),
    ("hybrid", lambda base: replace(base, mode="hybrid")),
]


def time_variants(
    store: Store, size: int, samples: int, variants: Sequence[Variant]
) -> dict[str, list[float]]:
    """Recall latency (ms) of each variant on the same queries, each with the plugin's 30
    excluded ids, in alternating order (ABBA: no variant always goes first)."""
    cache = QueryCache(RandomEmbedder())  # type: ignore[arg-type]
    lexical = LexicalCollections(store)
    rng = random.Random(size)
    out: dict[str, list[float]] = {label: [] for label, _ in variants}
    for i in range(samples + 3):
        text = f"do you remember the {rng.choice(WORDS)} and the {rng.choice(WORDS)}? ({i})"
        excluded = frozenset(str(BASE_ID + rng.randrange(size) * 10) for _ in range(30))
        base = RecallRequest(text, excluded, 5, 0.0, RecallFilters())
        cache.vector(text), cache.terms(text, AGENT.language)
        for label, asked in variants if i % 2 else variants[::-1]:
            t0 = time.perf_counter()
            recall(AGENT, asked(base), store=store, cache=cache, lexical=lexical)
            if i >= 3:  # the first ones warm connections and caches
                out[label].append((time.perf_counter() - t0) * 1000)
    return out


def fill_to(store: Store, have: int, size: int) -> int:
    """Writes chunks `have`..`size` (with BM25 terms) into the bench collection."""
    for start in range(have, size, 1000):
        store.upsert(NAME, _points(start, min(1000, size - start), terms=True))
    return size


def recall_rows(sizes: list[int], samples: int) -> list[list[Any]]:
    rows = []
    with stores() as by_path:
        for path, store in by_path.items():
            store.ensure_collection(NAME, size=DIMS, model=RandomEmbedder.model)
            have = 0
            for size in sizes:
                have = fill_to(store, have, size)
                got = time_variants(store, size, samples if path != "local mode" or size <= 1000
                                    else max(10, samples // 4), MODES)  # fmt: skip
                d, h = got["dense"], got["hybrid"]
                rows.append([path, size, len(d), median(d), pct(d, 95), median(h), pct(h, 95),
                             ratio(median(h), median(d))])  # fmt: skip
                print("row:", rows[-1], file=sys.stderr, flush=True)
    return rows


def write_cost(count: int = 2000) -> list[list[Any]]:
    """CPU of the terms per chunk, and an upsert of 1k chunks with and without them (REST)."""
    texts = _texts(10**6, count)
    t0 = time.process_time()
    for t in texts:
        document_terms(t)
    per_chunk = (time.process_time() - t0) * 1000 / count
    rows = [["BM25 terms (CPU, per chunk)", f"{per_chunk:.3f} ms"]]
    with stores() as by_path:
        store = by_path["REST test server"]
        store.ensure_collection(NAME, size=DIMS, model=RandomEmbedder.model)
        for terms in (False, True, False, True):
            points = _points(2 * 10**6 + terms * 10**5, 1000, terms=terms)
            t0 = time.perf_counter()
            store.upsert(NAME, points)
            label = "upsert 1k chunks, dense + BM25" if terms else "upsert 1k chunks, dense"
            rows.append([label, f"{(time.perf_counter() - t0) * 1000:.0f} ms"])
    return rows


def _writer(store: Store, stop: threading.Event, took: list[float]) -> None:
    """A flush's upsert of one chunk (both vectors) every 50 ms, timed."""
    n = 0
    while not stop.is_set():
        point = _points(3 * 10**6 + n, 1, terms=True)
        t0 = time.perf_counter()
        store.upsert(NAME, point)
        took.append((time.perf_counter() - t0) * 1000)
        n += 1
        stop.wait(0.05)


def _timed_writes(store: Store, seconds: float) -> list[float]:
    took: list[float] = []
    stop = threading.Event()
    thread = threading.Thread(target=_writer, args=(store, stop, took))
    thread.start()
    time.sleep(seconds)
    stop.set()
    thread.join()
    return took


def backfill_rate(size: int) -> list[list[Any]]:
    """Backfill throughput, and a flush's upserts meanwhile against the same without it."""
    rows = []
    with RedisServer() as server, stores() as by_path:
        client = redis.Redis.from_url(server.url)
        for path, store in by_path.items():
            store.ensure_collection(NAME, size=DIMS, model=RandomEmbedder.model)
            for start in range(0, size, 1000):
                store.upsert(NAME, _points(start, min(1000, size - start), terms=False))
            idle = _timed_writes(store, 2.0)
            guard = CollectionGuard(store, RandomEmbedder(), client)  # type: ignore[arg-type]
            took: list[float] = []
            stop = threading.Event()
            writer = threading.Thread(target=_writer, args=(store, stop, took))
            writer.start()
            t0 = time.perf_counter()
            report = backfill([AGENT], store=store, collections=guard, client=client,
                              budget_seconds=3600)  # fmt: skip
            spent = time.perf_counter() - t0
            stop.set()
            writer.join()
            rate = f"{report.points / spent:.0f}"
            during = [median(took), pct(took, 95), max(took)]
            rows.append([path, report.points, f"{spent:.1f} s", rate, median(idle), *during])
        client.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--backfill", type=int, default=10_000, help="points to backfill")
    parser.add_argument("--backfill-only", action="store_true")
    args = parser.parse_args(argv)
    print(describe())
    if not args.backfill_only:
        _recall_and_writes(args)
    print(f"\nBackfill of {args.backfill} points written without terms; a one-chunk upsert "
          "every 50 ms alone (idle) and during the backfill, ms")  # fmt: skip
    heads = ["Qdrant", "points", "took", "points/s", "upsert p50 idle"]
    heads += ["upsert p50 during", "p95 during", "max during"]
    print(table(heads, backfill_rate(args.backfill)))
    return 0


def _recall_and_writes(args: argparse.Namespace) -> None:
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = recall_rows(sizes, args.samples)
    print("\nRecall (api.recall.recall, query embedding cached, 30 exclusions), ms, same run")
    print(table(["Qdrant", "chunks", "n", "dense p50", "dense p95", "hybrid p50", "hybrid p95",
                 "hybrid / dense p50"], rows))  # fmt: skip
    print("\nWrite path: the extra cost of BM25 terms")
    print(table(["what", "cost"], write_cost()))


if __name__ == "__main__":
    sys.exit(main())

"""Recall latency: /retrieve vs its parts and a direct query_points, 1k/10k/50k chunks, 2 sizes.

Run: .venv/bin/python -m bench.recall [--quick]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from typing import Any

import httpx
import numpy as np
from qdrant_client import QdrantClient, models

from api.recall.query_filter import RecallFilters, recall_filter
from bench.machine import describe, rss_mib
from bench.stack import Stack
from bench.stats import median, pct, ratio, table
from bench.traffic import BASE_ID, START_MS, WORDS, sentence
from shared.format.messages import Message
from shared.format.payload import ChunkContext, chunk_payload
from shared.store.qdrant.filters import to_qdrant

BOT = "recall"
COLLECTION = "mem_recall"


def _payloads(start: int, count: int, rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for c in range(start, start + count):
        n = rng.randint(2, 6)
        msgs = [
            Message(
                id=str(BASE_ID + c * 10 + k),
                text=sentence(rng, 40, 160),
                ts=START_MS + c * 60_000 + k,
                speaker=("Alex", "Mythos")[k % 2],
                user_id=("111", None)[k % 2],
                is_self=bool(k % 2),
            )
            for k in range(n)
        ]
        context = ChunkContext("discord", channel_id=str(900 + c % 100), guild_id="77")
        out.append(chunk_payload(msgs, context))
    return out


def _grow(client: QdrantClient, have: int, want: int, dims: int, rng: random.Random) -> None:
    gen = np.random.default_rng(have + dims)
    for start in range(have, want, 500):
        n = min(500, want - start)
        vectors = gen.standard_normal((n, dims), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        points = [
            models.PointStruct(id=start + i, vector=np.round(v, 4).tolist(), payload=p)
            for i, (v, p) in enumerate(zip(vectors, _payloads(start, n, rng), strict=True))
        ]
        client.upsert(COLLECTION, points, wait=True)


def _sample(stack: Stack, client: QdrantClient, http: httpx.Client, i: int, size: int) -> dict:
    rng = random.Random(i)
    text = f"do you remember the {rng.choice(WORDS)} and the {rng.choice(WORDS)}? ({i})"
    excluded = [str(BASE_ID + rng.randrange(size) * 10) for _ in range(30)]
    body = {"bot": BOT, "query_text": text, "exclude_message_ids": excluded, "score_threshold": 0}
    t0 = time.perf_counter()
    r = http.post(f"{stack.api_url}/retrieve", json=body)
    t1 = time.perf_counter()
    e = http.post(
        f"{stack.embed_url}/embeddings",
        json={"model": "text-embedding-3-small", "input": [text + " again"]},
    )
    t2 = time.perf_counter()
    vector = e.json()["data"][0]["embedding"]
    flt = to_qdrant(recall_filter(RecallFilters(), excluded))
    client.query_points(
        COLLECTION, query=vector, limit=10, score_threshold=0.0, query_filter=flt, with_payload=True
    )
    t3 = time.perf_counter()
    client.query_points(COLLECTION, query=vector, limit=10, with_payload=True)
    t4 = time.perf_counter()
    return {
        "retrieve": (t1 - t0) * 1000,
        "ok": r.status_code == 200 and bool(r.json()["hits"]),
        "embed": (t2 - t1) * 1000,
        "query": (t3 - t2) * 1000,
        "plain": (t4 - t3) * 1000,
    }


def run_dims(dims: int, sizes: list[int], samples: dict[int, int]) -> list[list[Any]]:
    rows = []
    with Stack() as stack:
        stack.start_redis()
        stack.start_embedding(dims)
        stack.start_qdrant()
        stack.start_api()
        client = QdrantClient(url=stack.qdrant_url, prefer_grpc=False, timeout=120)
        client.create_collection(
            COLLECTION, models.VectorParams(size=dims, distance=models.Distance.COSINE)
        )
        rng, have = random.Random(dims), 0
        with httpx.Client(timeout=30, trust_env=False) as http:
            for size in sizes:
                t0 = time.perf_counter()
                _grow(client, have, size, dims, rng)
                have, load_s = size, time.perf_counter() - t0
                for i in range(3):  # warm up connections and caches
                    _sample(stack, client, http, -1 - i, size)
                got = [_sample(stack, client, http, i, size) for i in range(samples[size])]
                rows.append(_row(dims, size, got, rss_mib(stack.proc("qdrant").pid), load_s))
                print("row:", rows[-1], file=sys.stderr, flush=True)
        client.close()
    return rows


def _row(dims: int, size: int, got: list[dict], rss: float, load_s: float) -> list[Any]:
    col = {k: [g[k] for g in got] for k in ("retrieve", "embed", "query", "plain")}
    p50 = {k: median(v) for k, v in col.items()}
    overhead = p50["retrieve"] - p50["embed"] - p50["query"]
    ok = sum(g["ok"] for g in got)
    return [
        dims,
        size,
        len(got),
        p50["retrieve"],
        pct(col["retrieve"], 95),
        pct(col["retrieve"], 99),
        p50["embed"],
        p50["query"],
        p50["plain"],
        overhead,
        ratio(p50["retrieve"], p50["query"]),
        f"{ok}/{len(got)}",
        rss,
        load_s,
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1k chunks only")
    parser.add_argument("--max-3072", type=int, default=50_000, help="largest 3072-dim size")
    parser.add_argument(
        "--samples", default="100,40,15", help="queries at 1k,10k,50k chunks (comma-separated)"
    )
    args = parser.parse_args(argv)
    sizes = [1000] if args.quick else [1000, 10_000, 50_000]
    counts = [int(x) for x in args.samples.split(",")]
    samples = dict(zip([1000, 10_000, 50_000], counts, strict=True))
    if args.quick:
        samples = {1000: 30}
    print(describe())
    rows = []
    for dims in (384, 3072):
        wanted = [s for s in sizes if dims == 384 or s <= args.max_3072]
        rows += run_dims(dims, wanted, samples)
    print()
    print(
        "Recall: /retrieve (memory-pool api subprocess) vs a direct qdrant-client query_points "
        "on the same collection, same run; Qdrant = tests.support QdrantTestServer over REST "
        "(qdrant-client local mode in memory: brute force, payload indexes ignored); "
        "30 excluded ids per query; unique query texts (no query-cache hits); times in ms"
    )
    print(
        table(
            [
                "dims",
                "chunks",
                "n",
                "retrieve p50",
                "p95",
                "p99",
                "embed p50",
                "query p50 (filter)",
                "query p50 (no filter)",
                "memory-pool overhead p50",
                "retrieve / query",
                "hits ok",
                "Qdrant RSS MiB",
                "load s",
            ],
            rows,
        )
    )
    print(
        "overhead = retrieve p50 - embed p50 - filtered query p50 (the API's own time: HTTP, "
        "validation, threadpool, filter build, selection, formatting)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

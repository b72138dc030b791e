"""/retrieve of an English agent through a running `memory-pool serve` (Qdrant Edge), idle and
while another agent's SillyTavern (language chinese) sends /qdrant upserts back to back at the
limits: `--points` points of `--chars` random Han each (200 x 5,000 = MEMORY_POOL_MAX_CHARS).
Their BM25 terms (jieba's words) are made by the API; /retrieve waits on whatever holds its GIL.

Each serve (this checkout; `--before COMMIT` adds that commit's files, on its own copy of the
folder) answers: one small Chinese upsert (jieba's dictionary loaded), and one of 20 points
(the term process started, where there is one); the `--samples` queries asked once (their
vectors and terms cached, so both phases time the same work), then asked again idle; then
recalls for `--seconds` while a thread upserts, and the upserts' own times. A recall that fails
(503 past its timeout) is counted with its time.

Run: .venv/bin/python -m bench.qdrant_upsert_gil --size 3000 [--samples 200] [--seconds 60]
     [--before 5f3c2a1]
"""

from __future__ import annotations

import argparse
import random
import threading
import time
import uuid
from typing import Any

import httpx
import numpy as np

from bench.machine import describe
from bench.retrieve_backfill import ask
from bench.retrieve_serve import BOT, Serve
from bench.serves import each_serve
from bench.stats import median, pct, ratio, table

HANZI = "mem_hanzi"
AGENTS_YAML = f"""\
accept_unlisted_agents: true
agents:
  - name: {BOT}
  - name: hanzi
    language: chinese
"""
HEADER = ["serve", "idle p50", "p95", "during n", "during p50", "p95", "max",
          "p95 during / idle", "upserts", "upsert s p50"]  # fmt: skip


def upsert_body(points: int, chars: int, dims: int, seed: int) -> bytes:
    rng = random.Random(seed)
    vectors = np.random.default_rng(seed).standard_normal((points, dims), dtype=np.float32)
    body = {"points": [
        {"id": str(uuid.UUID(int=seed * 100_000 + n + 1)), "vector": vectors[n].tolist(),
         "payload": {"text": "".join(chr(rng.randrange(0x4E00, 0x9FA5)) for _ in range(chars)),
                     "messageIds": f"h{n}", "timestamp": 1718000000000, "isChunk": True}}
        for n in range(points)
    ]}  # fmt: skip
    return httpx.Request("PUT", "http://x", json=body).content


def put(http: httpx.Client, url: str, body: bytes) -> float:
    t = time.perf_counter()
    response = http.put(f"{url}/qdrant/collections/{HANZI}/points?wait=true", content=body,
                        headers={"content-type": "application/json"})  # fmt: skip
    if response.status_code != 200:
        raise RuntimeError(f"upsert failed: {response.status_code} {response.text[:500]}")
    return time.perf_counter() - t


def measure(serve: Serve, queries: list[Any], args: argparse.Namespace) -> dict[str, Any]:
    with httpx.Client(timeout=600, trust_env=False) as http:
        create = {"vectors": {"size": args.dims, "distance": "Cosine"}}
        http.put(f"{serve.url}/qdrant/collections/{HANZI}", json=create).raise_for_status()
        put(http, serve.url, upsert_body(1, 50, args.dims, 1))  # jieba loaded
        put(http, serve.url, upsert_body(20, args.chars, args.dims, 2))  # the term process
        for query in queries:  # every query's vector and terms cached: each phase asks the same
            ask(http, serve.url, query)
        idle = [ask(http, serve.url, queries[i % len(queries)]) for i in range(args.samples)]
        body = upsert_body(args.points, args.chars, args.dims, 3)
        upserts: list[float] = []
        stop = threading.Event()

        def load() -> None:
            with httpx.Client(timeout=600, trust_env=False) as writer:
                while not stop.is_set():
                    upserts.append(put(writer, serve.url, body))

        thread = threading.Thread(target=load, daemon=True)
        thread.start()
        during: list[float] = []
        failed = 0
        ends = time.monotonic() + args.seconds
        while time.monotonic() < ends:
            t = time.perf_counter()
            try:
                ask(http, serve.url, queries[len(during) % len(queries)])
            except RuntimeError:  # a recall over its timeout (503) counts, with its time
                failed += 1
            during.append((time.perf_counter() - t) * 1000)
        stop.set()
        thread.join()
    return {"idle": idle, "during": during, "upserts": upserts, "failed": failed}


def row(name: str, got: dict[str, Any]) -> list[Any]:
    idle, during, upserts = got["idle"], got["during"], got["upserts"]
    return [
        name, median(idle), pct(idle, 95), f"{len(during)} ({got['failed']} failed)",
        median(during), pct(during, 95),
        max(during), ratio(pct(during, 95), pct(idle, 95)), len(upserts), median(upserts),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=3000, help="the English agent's chunks")
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--points", type=int, default=200)
    parser.add_argument("--chars", type=int, default=5000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--before", default=None)
    args = parser.parse_args()
    print(describe(), flush=True)
    rows: list[list[Any]] = []
    for name, serve, queries in each_serve(args, AGENTS_YAML, "mp-upsert-gil-"):
        got = measure(serve, queries, args)
        rows.append(row(name, got))
        print(table(HEADER, rows), flush=True)


if __name__ == "__main__":
    main()

"""/retrieve of one agent through a running `memory-pool serve` (Qdrant Edge), idle and while
another agent's SillyTavern sends K small /qdrant upserts at once, for each K of `--burst`: the
cost to one agent of another's burst (api/agent_threads.py).

Each serve (this checkout; `--before COMMIT` adds that commit's files, on its own copy of the
folder) answers the `--samples` queries once (their vectors and terms cached, so every phase
times the same work), then again idle, then for `--seconds` per K while K threads upsert
`--points` points of ~500 characters each, back to back.

Run: .venv/bin/python -m bench.agent_threads [--size 3000] [--burst 1,16,64] [--seconds 15]
     [--before 5f3c2a1]
"""

from __future__ import annotations

import argparse
import contextlib
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

BUSY = "mem_busy"
AGENTS_YAML = f"""\
accept_unlisted_agents: true
agents:
  - name: {BOT}
  - name: busy
"""
WORDS = ["harbor", "winter", "candle", "forest", "train", "river", "bread", "moon", "island",
         "night", "friend", "map"]  # fmt: skip
HEADER = ["serve", "burst", "recalls", "p50 ms", "p95 ms", "max ms", "p50 / idle p50",
          "upserts/s", "upsert p50 ms", "not 200"]  # fmt: skip


def upsert_body(points: int, dims: int, seed: int) -> bytes:
    rng = random.Random(seed)
    vectors = np.random.default_rng(seed).standard_normal((points, dims), dtype=np.float32)
    body = {"points": [
        {"id": str(uuid.UUID(int=seed * 1000 + n + 1)), "vector": vectors[n].tolist(),
         "payload": {"text": " ".join(rng.choice(WORDS) for _ in range(80)),
                     "messageIds": f"b{seed}-{n}", "timestamp": 1718000000000, "isChunk": True}}
        for n in range(points)
    ]}  # fmt: skip
    return httpx.Request("PUT", "http://x", json=body).content


def during_burst(
    serve: Serve, queries: list[Any], burst: int, bodies: list[bytes], seconds: float
) -> dict[str, Any]:
    stop = threading.Event()
    upserts: list[float] = []
    refused = 0
    limits = httpx.Limits(max_connections=burst, max_keepalive_connections=burst)
    url = f"{serve.url}/qdrant/collections/{BUSY}/points?wait=true"
    headers = {"content-type": "application/json"}
    with httpx.Client(timeout=600, trust_env=False, limits=limits) as writer:

        def load(first: int) -> None:
            nonlocal refused
            n = first
            while not stop.is_set():
                t = time.perf_counter()
                response = writer.put(url, content=bodies[n % len(bodies)], headers=headers)
                upserts.append(time.perf_counter() - t)
                refused += response.status_code != 200
                n += burst

        threads = [threading.Thread(target=load, args=(i,), daemon=True) for i in range(burst)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        time.sleep(1)  # the burst under way
        during: list[float] = []
        with httpx.Client(timeout=600, trust_env=False) as http:
            ends = time.monotonic() + seconds
            while time.monotonic() < ends:
                t = time.perf_counter()
                # a recall over its timeout (503) counts, with its time
                with contextlib.suppress(RuntimeError):
                    ask(http, serve.url, queries[len(during) % len(queries)])
                during.append((time.perf_counter() - t) * 1000)
        stop.set()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
    return {"during": during, "upserts": upserts, "rate": len(upserts) / elapsed,
            "refused": refused}  # fmt: skip


def measure(serve: Serve, queries: list[Any], args: argparse.Namespace) -> list[list[Any]]:
    with httpx.Client(timeout=600, trust_env=False) as http:
        create = {"vectors": {"size": args.dims, "distance": "Cosine"}}
        http.put(f"{serve.url}/qdrant/collections/{BUSY}", json=create).raise_for_status()
        for query in queries:
            ask(http, serve.url, query)
        idle = [ask(http, serve.url, queries[i % len(queries)]) for i in range(args.samples)]
    bodies = [upsert_body(args.points, args.dims, seed) for seed in range(1, 200)]
    rows: list[list[Any]] = [["", "idle", len(idle), median(idle), pct(idle, 95), max(idle),
                              1.0, "", "", ""]]  # fmt: skip
    for burst in args.burst:
        got = during_burst(serve, queries, burst, bodies, args.seconds)
        during, upserts = got["during"], got["upserts"]
        rows.append(["", burst, len(during), median(during), pct(during, 95), max(during),
                     ratio(median(during), median(idle)), got["rate"],
                     median(upserts) * 1000, got["refused"]])  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=3000, help="the recalling agent's chunks")
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--points", type=int, default=5, help="points of each upsert")
    parser.add_argument("--burst", default="1,16,64", help="upserts at once, comma-separated")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--before", default=None)
    args = parser.parse_args()
    args.burst = [int(k) for k in args.burst.split(",")]
    print(describe(), flush=True)
    rows: list[list[Any]] = []
    for name, serve, queries in each_serve(args, AGENTS_YAML, "mp-agent-threads-"):
        got = measure(serve, queries, args)
        got[0][0] = name
        rows.extend(got)
        print(table(HEADER, rows), flush=True)


if __name__ == "__main__":
    main()

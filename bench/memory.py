"""Memory: Redis bytes per buffered message and per remembered id; process RSS under load.

Run: .venv/bin/python -m bench.memory [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

import redis

from bench.machine import RssSampler, describe
from bench.pipeline import _post, _settle
from bench.stack import LOCAL_MODEL, Stack
from bench.stats import table
from bench.traffic import unique_bodies


def _used(r: redis.Redis) -> int:
    return int(r.info("memory")["used_memory"])


def _usage(r: redis.Redis, pattern: str) -> tuple[int, int]:
    """(keys, summed MEMORY USAGE) of the keys matching `pattern`."""
    keys = list(r.scan_iter(match=pattern, count=1000))
    pipe = r.pipeline(transaction=False)
    for key in keys:
        pipe.memory_usage(key, samples=0)
    return len(keys), sum(int(x or 0) for x in pipe.execute())


def redis_bytes(n: int) -> list[list[Any]]:
    with Stack() as stack:
        stack.start_redis()
        stack.start_embedding(384)
        stack.start_api()  # no worker and no scheduler: everything stays buffered
        r = stack.redis_client()
        asyncio.run(_post(stack.api_url, unique_bodies(10, per_request=10, prefix="warm")))
        before = _used(r)
        bodies = unique_bodies(n, per_request=10, prefix="mem")
        text = sum(len(m["text"]) for b in bodies for m in b["messages"]) / n
        asyncio.run(_post(stack.api_url, bodies))
        after_save = _used(r)
        seen_keys, seen_usage = _usage(r, "mp:seen:mem*")
        buf_keys, buf_usage = _usage(r, "mp:buf:*")
        for key in r.scan_iter(match="mp:buf:*", count=1000):
            r.delete(key)
        after_drop = _used(r)
    buffered = (after_save - after_drop) / n
    remembered = (after_drop - before) / n
    return [
        [
            "buffered message (LIST entry, JSON)",
            "used_memory delta",
            buffered,
            buf_usage / n,
            f"{buf_keys} lists; mean text {text:.0f} chars",
            buffered * 1e6 / 2**20,
        ],
        [
            "remembered message id (dedupe key + TTL)",
            "used_memory delta",
            remembered,
            seen_usage / n,
            f"{seen_keys} keys",
            remembered * 1e6 / 2**20,
        ],
    ]


def rss_under_load(n: int, local: bool) -> list[list[Any]]:
    with Stack() as stack:
        stack.start_redis()
        stack.start_embedding(384)
        stack.start_qdrant()
        if local:
            stack.use_local_model()
        stack.start_api()
        stack.start_worker()
        stack.start_scheduler()
        pids = {p.name: p.pid for p in stack.procs}
        pids["redis"] = stack.redis_pid()
        bodies = unique_bodies(n, per_request=5, prefix="rss")
        with RssSampler(pids) as rss:
            asyncio.run(_post(stack.api_url, bodies))
            _settle(stack, sorted({b["bot"] for b in bodies}))
    label = "local MiniLM" if local else "embedding server"
    order = ["worker0", "api", "scheduler", "qdrant", "embedding", "redis"]
    return [[f"{name} ({label})", n, rss.first[name], rss.peak[name]] for name in order]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    n_redis = 2000 if args.quick else 20_000
    n_load = 500 if args.quick else 3000
    print(describe())
    redis_rows = redis_bytes(n_redis)
    rss_rows = rss_under_load(n_load, local=False)
    if LOCAL_MODEL.exists():
        rss_rows += rss_under_load(n_load // 2, local=True)
    else:
        print(f"{LOCAL_MODEL} is absent: no local-model RSS rows")
    print()
    print(
        f"Redis memory after saving {n_redis:,} unique messages (5 agents, 100 channels), "
        "no worker running; bytes per message"
    )
    print(
        table(
            ["what", "method", "bytes/msg", "MEMORY USAGE bytes/msg", "keys", "MiB per 1M"],
            redis_rows,
        )
    )
    print()
    print(
        "Process RSS (VmRSS) under load: unique messages through /save to Qdrant, 1 worker "
        "(solo); 'start' = when the load began (after start-up), 'peak' sampled every 0.2 s"
    )
    print(table(["process", "msgs", "start MiB", "peak MiB"], rss_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

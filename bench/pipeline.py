"""Pipeline throughput: unique messages/s from /save to points in Qdrant, 1 and 2 workers.

Run: .venv/bin/python -m bench.pipeline [--quick] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench import profiling, st_path
from bench.machine import RssSampler, describe
from bench.stack import LOCAL_MODEL, Stack
from bench.stats import median, ratio, table
from bench.traffic import unique_bodies
from shared.format.naming import collection_name

DIMS = 384
AGENTS = 5


@dataclass(frozen=True)
class Config:
    label: str
    workers: int
    local: bool


async def _post(url: str, bodies: list[dict[str, Any]], concurrency: int = 4) -> None:
    queue = iter(bodies)
    async with httpx.AsyncClient(timeout=60, trust_env=False) as client:

        async def worker() -> None:
            for body in queue:
                response = await client.post(f"{url}/save", json=body)
                response.raise_for_status()

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def _settle(stack: Stack, agents: list[str], timeout: float = 300) -> None:
    """Force the open chunks out, then wait until nothing is due or queued."""
    with httpx.Client(timeout=timeout, trust_env=False) as client:
        for agent in agents:
            params = {"wait": "true", "timeout": "300"}
            client.post(f"{stack.api_url}/agents/{agent}/flush", params=params).raise_for_status()
    r = stack.redis_client()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not r.zcard("mp:due") and not r.llen("celery"):
            return
        time.sleep(0.02)
    raise RuntimeError("the pipeline did not settle")


def _trial(stack: Stack, n: int, prefix: str, profile: Path | None) -> dict[str, Any]:
    bodies = unique_bodies(n, per_request=5, agents=AGENTS, prefix=prefix)
    agents = sorted({b["bot"] for b in bodies})
    stack.reset_counts()
    sampler = None
    if profile is not None:
        sampler = profiling.start(stack.proc("worker0").pid, 120, profile, wall=True)
    started = time.perf_counter()
    asyncio.run(_post(stack.api_url, bodies))
    saved = time.perf_counter() - started
    _settle(stack, agents)
    elapsed = time.perf_counter() - started
    if sampler is not None:
        sampler.send_signal(signal.SIGINT)  # py-spy writes what it has on Ctrl-C
        sampler.wait(timeout=30)
    emb, qd = stack.counts()
    collections = [collection_name(a, None) for a in agents]
    texts, stored = st_path.chunk_texts(stack.qdrant_url, collections)
    return {
        "elapsed": elapsed,
        "saved": saved,
        "msgs": n,
        "stored": stored,
        "chunks": len(texts),
        "emb": emb.get("requests", 0),
        "ups": qd.get("upsert", 0),
        "texts": texts,
    }


def run_config(cfg: Config, n: int, trials: int, profile: bool) -> dict[str, Any]:
    with Stack() as stack:
        stack.start_redis()
        stack.start_embedding(DIMS)
        stack.start_qdrant()
        if cfg.local:
            stack.use_local_model()
        stack.start_api()
        for i in range(cfg.workers):
            stack.start_worker(i)
        stack.start_scheduler()
        pids = {p.name: p.pid for p in stack.procs if p.name.startswith("worker")}
        runs, peak = [], 0.0
        for t in range(trials):
            out = stack.dir / "worker.raw" if profile and t == trials - 1 else None
            with RssSampler(pids) as rss:
                runs.append(_trial(stack, n, f"{cfg.label.split()[0]}{cfg.workers}t{t}x", out))
            peak = max(peak, *rss.peak.values())
        st_seconds = []
        if not cfg.local and cfg.workers == 1:
            for run in runs:
                texts = run["texts"][: 400 if n > 1000 else len(run["texts"])]
                per = st_path.per_chunk(stack.embed_url, stack.qdrant_url, texts, DIMS) / len(texts)
                st_seconds.append(per * run["chunks"] / run["msgs"] * 1000)
        prof = ""
        if profile:
            raw = stack.dir / "worker.raw"
            prof = profiling.summarize(raw) + "\n\nwithin flush():\n"
            prof += profiling.summarize(raw, under="flush (flush.py)")
    return {"runs": runs, "peak_rss": peak, "st_s_per_1k": st_seconds, "profile": prof}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--profile", action="store_true", help="py-spy worker0 (1 worker rows)")
    parser.add_argument("--messages", type=int, default=None)
    parser.add_argument("--trials", type=int, default=None)
    args = parser.parse_args(argv)
    n = args.messages or (500 if args.quick else 3000)
    n_local = max(300, n // 2) if not args.quick else 300
    trials = args.trials or (1 if args.quick else 3)
    print(describe())
    configs = [Config("embedding server", 1, False), Config("embedding server", 2, False)]
    if LOCAL_MODEL.exists():
        configs += [Config("local MiniLM", 1, True), Config("local MiniLM", 2, True)]
    else:
        print(f"{LOCAL_MODEL} is absent: the local MiniLM rows are skipped")
    if args.quick:
        configs = [c for c in configs if c.workers == 1]
    results = {}
    for cfg in configs:
        count = n_local if cfg.local else n
        results[cfg] = (count, run_config(cfg, count, trials, args.profile and cfg.workers == 1))
    _report(results, trials)
    return 0


def _report(results: dict[Config, tuple[int, dict[str, Any]]], trials: int) -> None:
    rows, base = [], None
    st_rows = []
    for cfg, (n, res) in results.items():
        runs = res["runs"]
        rate = median([r["msgs"] / r["elapsed"] for r in runs])
        base = base or rate
        per1k = median([r["elapsed"] / r["msgs"] * 1000 for r in runs])
        chunks = median([r["chunks"] / r["msgs"] * 1000 for r in runs])
        emb = median([r["emb"] / r["msgs"] * 1000 for r in runs])
        ups = median([r["ups"] / r["msgs"] * 1000 for r in runs])
        stored = min(r["stored"] / r["msgs"] for r in runs)
        emb_cell: Any = emb if not cfg.local else "in-process"
        rows.append(
            [
                f"memory-pool, {cfg.label}",
                cfg.workers,
                n,
                rate,
                ratio(rate, base),
                per1k,
                chunks,
                emb_cell,
                ups,
                f"{stored:.0%}",
                res["peak_rss"],
            ]
        )
        if res["st_s_per_1k"]:
            st = median(res["st_s_per_1k"])
            st_rows.append(
                [
                    "st-qdrant-memory per chunk, measured",
                    1,
                    n,
                    1000 / st,
                    ratio(1000 / st, base),
                    st,
                    chunks,
                    chunks,
                    chunks,
                    "",
                    "",
                ]
            )
    print()
    print(
        f"Pipeline: unique messages /save -> Qdrant points, {trials} trial(s) each, medians; "
        f"{AGENTS} agents, 100 channels, 5 new messages per request, {DIMS} dims, Qdrant = "
        "tests.support QdrantTestServer (local mode in memory) over REST"
    )
    print(
        table(
            [
                "write path",
                "workers",
                "msgs",
                "msgs/s",
                "vs 1 worker",
                "s per 1k msgs",
                "chunks /1k msgs",
                "embed reqs /1k",
                "upserts /1k",
                "stored",
                "worker peak RSS MiB",
            ],
            rows + st_rows,
        )
    )
    print(
        "st-qdrant-memory row: its per-chunk path (1 embedding request, 1 duplicate search with "
        "cosine >= 0.92, 1 upsert per chunk) on the same chunk texts, same servers, sequential; "
        "its requests per 1k messages = chunks per 1k messages (x3 round trips in all)"
    )
    for cfg, (_, res) in results.items():
        if res["profile"]:
            print(f"\nprofile of worker0, {cfg.label}, last trial (py-spy):\n{res['profile']}")


if __name__ == "__main__":
    sys.exit(main())

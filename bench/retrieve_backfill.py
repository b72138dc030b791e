"""/retrieve through a running `memory-pool serve` (Qdrant Edge) while the BM25 backfill gives
terms to N points that have none, against the same serve once the backfill is done (its own
baseline, same run), with the 30 exclusions of the query's best-matching chunks.

The folder is filled as another tool would leave it: vectors and payloads, no terms and no
recorded encoding. One /save names the agent (the backfill fills the collections of agents it
knows); /retrieve is then asked in a loop, /health polled each second for the points still
lacking terms, until none are left; then `--samples` more with the backfill idle. `--before
COMMIT` runs the same on serve from that commit's files (a fresh folder each).

Run: .venv/bin/python -m bench.retrieve_backfill --size 50000 --dims 384 [--samples 200]
     [--before e722070]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.machine import describe
from bench.retrieve_serve import BOT, Ask, Serve, asks, baseline_code, fill_edge
from bench.stack import Stack
from bench.stats import median, pct, ratio, table

HEADER = ["chunks", "serve", "backfill s", "during n", "during p50", "p95", "max",
          "idle p50", "p95", "max", "p95 during / idle"]  # fmt: skip
SAVE = {"bot": BOT, "messages": [{"speaker_kind": "user", "discord_user_id": "1",
        "speaker_name": "Alex", "text": "hello there, bench", "message_id": "bench-1",
        "ts": 1718000000000, "channel_id": "c1"}]}  # fmt: skip


def lacking(http: httpx.Client, url: str) -> int:
    agents = http.get(f"{url}/health").json().get("agents", {})
    return int(agents.get(BOT, {}).get("points_without_bm25", -1))


def ask(http: httpx.Client, url: str, query: Ask) -> float:
    text, excluded = query
    body = {"bot": BOT, "query_text": text, "exclude_message_ids": excluded, "score_threshold": 0}
    t = time.perf_counter()
    response = http.post(f"{url}/retrieve", json=body)
    took = (time.perf_counter() - t) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"/retrieve failed: {response.status_code} {response.text}")
    return took


def measure(serve: Serve, queries: list[Ask], samples: int, limit: float) -> dict[str, Any]:
    """Recalls while the backfill runs (until /health says none lack terms), then idle."""
    during: list[float] = []
    with httpx.Client(timeout=60, trust_env=False) as http:
        http.post(f"{serve.url}/save", json=SAVE).raise_for_status()
        started = time.monotonic()
        polled, left = started, lacking(http, serve.url)
        while left != 0 and time.monotonic() - started < limit:
            during.append(ask(http, serve.url, queries[len(during) % len(queries)]))
            if time.monotonic() - polled >= 1.0:
                polled, left = time.monotonic(), lacking(http, serve.url)
        seconds = time.monotonic() - started
        idle = [ask(http, serve.url, queries[i % len(queries)]) for i in range(samples)]
    return {"seconds": seconds, "during": during, "idle": idle, "left": left}


def summary(got: dict[str, Any]) -> list[Any]:
    during, idle = got["during"], got["idle"]
    seconds = f"{got['seconds']:.0f}"
    if got["left"] != 0:
        seconds += f" ({got['left']} left)"
    return [
        seconds, len(during), median(during), pct(during, 95), max(during, default=float("nan")),
        median(idle), pct(idle, 95), max(idle), ratio(pct(during, 95), pct(idle, 95)),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=50000)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--limit", type=float, default=600, help="most seconds of backfill")
    parser.add_argument("--before", default=None)
    args = parser.parse_args()
    print(describe(), flush=True)
    rows: list[list[Any]] = []
    label = f"{args.size // 1000}k x {args.dims}"
    with tempfile.TemporaryDirectory(prefix="mp-backfill-") as tmp, Stack() as stack:
        embed_url = stack.start_embedding(args.dims)
        codes: dict[str, Path | None] = {"this version": None}
        if args.before:
            codes[args.before] = baseline_code(args.before, Path(tmp) / "before")
        for name, code in codes.items():
            data = Path(tmp) / f"data-{len(rows)}"
            data.mkdir()
            fill_edge(data, args.size, args.dims, terms=False)
            queries = asks(data, embed_url, args.size, args.samples, "top")[5:]
            serve = Serve(data, embed_url, code=code)
            try:
                got = measure(serve, queries, args.samples, args.limit)
            finally:
                serve.stop()
            rows.append([label, name, *summary(got)])
            print(table(HEADER, rows), flush=True)


if __name__ == "__main__":
    main()

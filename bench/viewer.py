"""Memory viewer load time: the page and the API calls it makes, for an agent of 1k and 50k points.

Run: .venv/bin/python -m bench.viewer [--qdrant local|rest] [--quick] [--samples N]

Same run, same API process, two agents: `small` (1k chunks, the baseline) and `large` (50k);
Qdrant as `memory-pool serve` keeps it (qdrant-client local mode under the data folder), or
with `--qdrant rest` the REST test server (local mode behind Qdrant's REST API, payload indexes
created as memory-pool creates them). The page is timed in Debian's headless Chromium, from
navigation to the first page of chunks rendered.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from qdrant_client import QdrantClient, models
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from bench.machine import describe
from bench.recall import _payloads
from bench.stack import Stack
from bench.stats import median, pct, ratio, table
from shared.store.interface import PAYLOAD_INDEXES
from shared.store.qdrant.collection_setup import SCHEMAS
from tests.support.browser import chromium

DIMS = 384
DAY_MS = 86_400_000
AGENTS = "agents:\n  - name: small\n  - name: large\n"


def fill(client: QdrantClient, name: str, size: int, *, indexes: bool) -> None:
    """`size` real chunk payloads spread over the last 60 days, random unit vectors."""
    client.create_collection(name, models.VectorParams(size=DIMS, distance=models.Distance.COSINE))
    if indexes:
        for field, schema in PAYLOAD_INDEXES.items():
            client.create_payload_index(name, field, SCHEMAS[schema], wait=True)
    rng, gen = random.Random(size), np.random.default_rng(size)
    now, span = int(time.time() * 1000), 60 * DAY_MS
    for start in range(0, size, 1000):
        n = min(1000, size - start)
        vectors = gen.standard_normal((n, DIMS), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        payloads = _payloads(start, n, rng)
        for i, payload in enumerate(payloads):
            payload["timestamp"] = now - span + (start + i) * span // size
        points = [
            models.PointStruct(id=start + i, vector=v.tolist(), payload=p)
            for i, (v, p) in enumerate(zip(vectors, payloads, strict=True))
        ]
        client.upsert(name, points, wait=True)


def timed(call: Callable[[], Any], samples: int) -> list[float]:
    call()  # warm
    out = []
    for _ in range(samples):
        t0 = time.perf_counter()
        call()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def api_calls(http: httpx.Client, url: str, bot: str) -> dict[str, Callable[[], Any]]:
    base = f"{url}/agents/{bot}"

    def get(path: str, **params: Any) -> Any:
        response = http.get(f"{base}{path}", params=params)
        response.raise_for_status()
        return response.json()

    def page_five() -> None:
        cursor = None
        for _ in range(5):
            cursor = get("/memories", limit=20, **({"cursor": cursor} if cursor else {}))[
                "next_cursor"
            ]

    return {
        "stats": lambda: get("/stats"),
        "memories p1": lambda: get("/memories", limit=20),
        "memories p1-5": page_five,
        "memories channel": lambda: get("/memories", limit=20, channel_id="907"),
        "timeline 30d": lambda: get("/timeline", days=30),
    }


def page_load(driver: WebDriver, url: str, bot: str) -> float:
    """ms from navigation to the agent's first page of chunks rendered (viewer.js sets
    data-version on the list when a page is shown)."""
    driver.get("about:blank")
    t0 = time.perf_counter()
    driver.get(f"{url}/ui?agent={bot}#browse")
    WebDriverWait(driver, 120).until(
        lambda d: d.execute_script("return document.querySelector('#browse-list').dataset.version")
    )
    elapsed = (time.perf_counter() - t0) * 1000
    shown = driver.execute_script("return document.querySelectorAll('#browse-list article').length")
    assert shown == 20, shown
    return elapsed


def measure(stack: Stack, label: str, samples: int, profile: Path) -> list[list[Any]]:
    rows = []
    with httpx.Client(timeout=120, trust_env=False) as http, chromium(profile) as driver:
        for bot, size in (("small", 1000), ("large", 50_000)):
            found: dict[str, list[float]] = {}
            for name, call in api_calls(http, stack.api_url, bot).items():
                found[name] = timed(call, samples)
            found["page: browse"] = [page_load(driver, stack.api_url, bot) for _ in range(samples)]
            for name, values in found.items():
                rows.append([label, name, bot, size, median(values), pct(values, 95)])
            print("done:", label, bot, file=sys.stderr, flush=True)
    return rows


def with_ratios(rows: list[list[Any]]) -> list[list[Any]]:
    base = {(r[0], r[1]): r[4] for r in rows if r[2] == "small"}
    return [[*r, ratio(r[4], base[(r[0], r[1])]) if r[2] == "large" else 1.0] for r in rows]


def run(rest: bool, samples: int, quick: bool) -> list[list[Any]]:
    rows = []
    sizes = {"small": 1000, "large": 5000 if quick else 50_000}
    with Stack(AGENTS) as stack, tempfile.TemporaryDirectory() as tmp:
        stack.start_redis()
        stack.start_embedding(DIMS)
        if rest:
            stack.start_qdrant()
            client = QdrantClient(url=stack.qdrant_url, prefer_grpc=False, timeout=300)
        else:
            path = Path(stack.env["MEMORY_POOL_DATA_DIR"]) / "qdrant"
            path.mkdir(parents=True)
            client = QdrantClient(path=str(path))
        t0 = time.perf_counter()
        for bot, size in sizes.items():
            fill(client, f"mem_{bot}", size, indexes=rest)
        print(f"filled in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        client.close()  # local mode: one process at a time; the API opens it now
        stack.start_api()
        label = "REST test server" if rest else "local mode (serve)"
        rows += measure(stack, label, samples, Path(tmp) / "profile")
    if quick:
        for row in rows:
            row[3] = sizes[row[2]]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="5k points instead of 50k")
    parser.add_argument("--qdrant", choices=["local", "rest"], default="local")
    parser.add_argument("--samples", type=int, default=7)
    args = parser.parse_args(argv)
    print(describe())
    rows = run(args.qdrant == "rest", args.samples, args.quick)
    print()
    print(
        "Memory viewer: API calls the page makes, and the page in headless Chromium (navigation "
        "to the first 20 chunks rendered), times in ms; ratio = large / small (same run)"
    )
    headers = ["Qdrant", "what", "agent", "points", "p50", "p95", "ratio p50"]
    print(table(headers, with_ratios(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

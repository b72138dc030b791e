"""The API's CPU per /save with metrics on vs off, in one process: no scheduling noise.

Run: .venv/bin/python -m bench.metrics_cost [--requests 1000] [--rounds 10]

Two apps built from the same settings but MEMORY_POOL_METRICS, on one runtime and one Redis,
called in-process through the ASGI interface (httpx's ASGITransport, no sockets) with the
Discord plugin's traffic (30 messages a request, 1-2 new); rounds alternate which app goes
first. CPU = this process's time.process_time() per request (the app and the client both,
the same client for both apps). On a shared machine a round's CPU time swings by a third, so the
headline is the median of each round's on/off ratio (the two apps run back to back).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx

from api.app import create_app
from bench.machine import describe
from bench.stats import median, ratio, table
from bench.traffic import DiscordTraffic
from shared.agents import Agents
from shared.runtime import Runtime
from tests.support.redis_server import RedisServer
from tests.support.stack import stack_settings


async def _round(app: object, bodies: list[bytes]) -> float:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    headers = {"content-type": "application/json"}
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        started = time.process_time()
        for body in bodies:
            response = await client.post("/save", content=body, headers=headers)
            assert response.status_code == 202, response.text
        return (time.process_time() - started) / len(bodies) * 1000


async def _run(settings_dir: Path, redis_url: str, requests: int, rounds: int) -> dict:
    settings = stack_settings(redis_url, "http://127.0.0.1:9/v1", settings_dir)
    runtime = Runtime.build(settings, agents=Agents([], accept_unlisted=True))
    apps = {
        "metrics on": create_app(settings, runtime=runtime),
        "metrics off": create_app(settings.model_copy(update={"metrics_enabled": False}),
                                  runtime=runtime),
    }  # fmt: skip
    traffic = DiscordTraffic()
    results: dict[str, list[float]] = {name: [] for name in apps}
    try:
        async with contextlib.AsyncExitStack() as lifespans:
            for app in apps.values():
                await lifespans.enter_async_context(app.router.lifespan_context(app))
            for n in range(rounds):
                for name in list(apps) if n % 2 == 0 else list(apps)[::-1]:
                    bodies = [json.dumps(traffic.turn()[0]).encode() for _ in range(requests)]
                    results[name].append(await _round(apps[name], bodies))
    finally:
        runtime.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args(argv)
    print(describe())
    with RedisServer() as server, tempfile.TemporaryDirectory() as folder:
        results = asyncio.run(_run(Path(folder), server.url, args.requests, args.rounds))
    on, off = median(results["metrics on"]), median(results["metrics off"])
    paired = median([ratio(a, b) for a, b in zip(results["metrics on"], results["metrics off"],
                                                 strict=True)])  # fmt: skip
    print(f"\n/save in-process, {args.rounds} rounds x {args.requests} requests; medians")
    print(table(["app", "CPU ms/req", "vs off"], [["metrics on", on, ratio(on, off)],
                                                  ["metrics off", off, 1.0]]))  # fmt: skip
    print(f"median of the rounds' on/off CPU ratios: {paired:.3f}")
    for name, values in results.items():
        print(f"{name}, each round: {', '.join(f'{v:.2f}' for v in values)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

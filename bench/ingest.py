"""Ingest acceptance: Discord-plugin traffic against /save, next to /noop and the naive design.

Run: .venv/bin/python -m bench.ingest [--quick] [--profile] [--metrics-cost]

--metrics-cost adds two twin API processes on the same Redis that only take /save, one with
metrics on (scraped every --scrape-every seconds: 15, as the committed Prometheus config does)
and one with MEMORY_POOL_METRICS=false, in every round: the cost of metrics, in one run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from bench import profiling
from bench.machine import cpu_seconds, describe
from bench.noop_app import NAIVE_QUEUE
from bench.procs import ROOT, Proc, base_env
from bench.stack import Stack
from bench.stats import median, pct, ratio, table
from tests.support.redis_server import free_port

PATHS = ("/noop", "/save", "/naive")
METRICS_ON = "/save (twin, metrics on)"
METRICS_OFF = "/save (twin, metrics off)"
SCRAPE_EVERY_S = 15.0  # monitoring/prometheus/prometheus.yml's interval


class LoadGen:
    """The load generator subprocess (bench.loadgen), one JSON command at a time."""

    def __init__(self) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "bench.loadgen"],
            cwd=ROOT,
            env=base_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, **cmd: Any) -> dict[str, Any]:
        assert self.popen.stdin and self.popen.stdout
        self.popen.stdin.write(json.dumps(cmd) + "\n")
        self.popen.stdin.flush()
        line = self.popen.stdout.readline()
        if not line:
            raise RuntimeError("the load generator died")
        return json.loads(line)

    def close(self) -> None:
        if self.popen.stdin:
            self.popen.stdin.close()
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


Target = tuple[Proc, str, str]  # the API process, its URL, the path


def _one(stack: Stack, gen: LoadGen, target: Target, requests: int, conc: int) -> dict[str, Any]:
    proc, url, path = target
    api, redis_pid = proc.pid, stack.redis_pid()
    cpu0 = cpu_seconds(api), cpu_seconds(redis_pid)
    result = gen.run(cmd="http", url=url, path=path, requests=requests, concurrency=conc)
    cpu1 = cpu_seconds(api), cpu_seconds(redis_pid)
    lat = result["latencies_ms"]
    bad = {k: v for k, v in result["statuses"].items() if k != "202"}
    if bad:
        print(f"warning: {path} answered {bad}", file=sys.stderr)
    if path == "/naive":  # nobody consumes the naive queue: empty it between rounds
        stack.redis_client().delete(NAIVE_QUEUE)
    return {
        "rps": requests / result["elapsed"],
        "msgs": result["messages"] / result["elapsed"],
        "new": result["new"] / result["elapsed"],
        "p50": pct(lat, 50),
        "p99": pct(lat, 99),
        "api_ms": (cpu1[0] - cpu0[0]) / requests * 1000,
        "redis_ms": (cpu1[1] - cpu0[1]) / requests * 1000,
        "accepted": result["accepted"],
        "sent_new": result["new"],
    }


def _start_twin(stack: Stack, metrics: bool) -> Target:
    """The bench app again, taking only /save, with metrics on or off."""
    name = f"api-metrics-{'on' if metrics else 'off'}"
    port = free_port()
    argv = [sys.executable, "-m", "bench.noop_app", "--port", str(port)]
    # Its own data folder: Qdrant's local mode is one process's (/save never touches it).
    env = base_env(**{**stack.env, "MEMORY_POOL_DATA_DIR": str(stack.dir / name)})
    env["MEMORY_POOL_METRICS"] = "true" if metrics else "false"
    proc = Proc(name, argv, env, stack.dir)
    stack.procs.append(proc)
    url = f"http://127.0.0.1:{port}"
    proc.wait_http(f"{url}/openapi.json")
    return proc, url, "/save"


def _scrape_forever(url: str, every: float, stop: threading.Event) -> None:
    """Prometheus' part: /metrics every `every` seconds while the rounds run."""
    with httpx.Client(trust_env=False, timeout=10) as client:
        while not stop.wait(every):
            client.get(f"{url}/metrics")


def _profile(stack: Stack, gen: LoadGen, requests: int, conc: int, out: Path) -> str:
    sampler = profiling.start(stack.proc("api").pid, 8, out)
    if sampler is None:
        return "py-spy is not installed: `.venv/bin/pip install py-spy`"
    time.sleep(0.5)
    deadline = time.monotonic() + 7
    while time.monotonic() < deadline:
        gen.run(cmd="http", url=stack.api_url, path="/save", requests=requests, concurrency=conc)
    sampler.wait(timeout=60)
    return profiling.summarize(out)


def _targets(stack: Stack, args: argparse.Namespace, stop: threading.Event) -> dict[str, Target]:
    api = stack.start_api(module="bench.noop_app")
    targets = {path: (api, stack.api_url, path) for path in PATHS}
    if args.metrics_cost:
        targets[METRICS_ON] = _start_twin(stack, metrics=True)
        targets[METRICS_OFF] = _start_twin(stack, metrics=False)
        scrape = (targets[METRICS_ON][1], args.scrape_every, stop)
        threading.Thread(target=_scrape_forever, args=scrape, daemon=True).start()
    return targets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--profile", action="store_true", help="py-spy the API during /save")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--requests", type=int, default=None, help="per endpoint and round")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--metrics-cost", action="store_true", help="twins: metrics on vs off")
    parser.add_argument("--scrape-every", type=float, default=SCRAPE_EVERY_S, help="seconds")
    args = parser.parse_args(argv)
    paths = (*PATHS, METRICS_ON, METRICS_OFF) if args.metrics_cost else PATHS
    rounds = args.rounds or (2 if args.quick else 5)
    requests = args.requests or (300 if args.quick else 2000)
    task_msgs = 1000 if args.quick else 5000
    print(describe())
    results: dict[str, list[dict[str, Any]]] = {p: [] for p in paths}
    loop_rates: list[float] = []
    profile_text = ""
    stop_scraping = threading.Event()
    with Stack() as stack:
        stack.start_redis()
        stack.start_embedding(384)
        targets = _targets(stack, args, stop_scraping)
        gen = LoadGen()
        try:
            gen.run(cmd="warm", url=stack.api_url)
            for n in range(rounds):
                # Alternate the order so neither API always runs on a warmer machine.
                for path in paths if n % 2 == 0 else paths[::-1]:
                    result = _one(stack, gen, targets[path], requests, args.concurrency)
                    results[path].append(result)
                loop = gen.run(cmd="send_task", broker=stack.env["REDIS_URL"], messages=task_msgs)
                loop_rates.append(loop["messages"] / loop["elapsed"])
                stack.redis_client().delete(NAIVE_QUEUE)
            if args.profile:
                profile_text = _profile(stack, gen, 300, args.concurrency, stack.dir / "api.raw")
        finally:
            stop_scraping.set()
            gen.close()
    _report(results, loop_rates, rounds, requests, args.concurrency, profile_text)
    return 0


def _report(
    results: dict[str, list[dict[str, Any]]],
    loop_rates: list[float],
    rounds: int,
    requests: int,
    conc: int,
    profile_text: str,
) -> None:
    noop_rps = median([r["rps"] for r in results["/noop"]])
    rows = []
    for path in results:
        rs = results[path]
        m = {k: median([r[k] for r in rs]) for k in rs[0]}
        rows.append(
            [
                f"POST {path}",
                m["rps"],
                m["msgs"],
                m["new"],
                m["p50"],
                m["p99"],
                ratio(m["rps"], noop_rps),
                m["api_ms"],
                m["redis_ms"],
            ]
        )
    loop = median(loop_rates)
    rows.insert(3, ["send_task loop (1/msg)", loop / 30, loop, loop / 30 * 1.5] + [""] * 5)
    print()
    print(
        f"Ingest: {rounds} rounds x {requests} requests per endpoint, {conc} connections, "
        "30 messages/request (1-2 new), 100 channels, 5 agents; medians over rounds"
    )
    print(
        table(
            [
                "endpoint",
                "req/s",
                "msgs recv/s",
                "new msgs/s",
                "p50 ms",
                "p99 ms",
                "vs noop",
                "API CPU ms/req",
                "Redis CPU ms/req",
            ],
            rows,
        )
    )
    save = results["/save"]
    print(
        f"\nheadline: /save req/s / /noop req/s = {rows[1][6]:.2f}; "
        f"accepted {sum(r['accepted'] for r in save)} of {sum(r['sent_new'] for r in save)} "
        "new messages sent to /save"
    )
    print(
        "send_task loop row: messages/s of one producer enqueuing one task per message; "
        "req/s = that / 30 (enqueue every received message), new msgs/s assumes 1.5 new per request"
    )
    if METRICS_OFF in results:
        on = median([r["rps"] for r in results[METRICS_ON]])
        off = median([r["rps"] for r in results[METRICS_OFF]])
        cpu_on = median([r["api_ms"] for r in results[METRICS_ON]])
        cpu_off = median([r["api_ms"] for r in results[METRICS_OFF]])
        print(f"metrics: API CPU per /save with metrics on / off = {ratio(cpu_on, cpu_off):.3f}")
        print(f"metrics: /save req/s with metrics on / off = {ratio(on, off):.3f} (same run)")
    if profile_text:
        print("\nprofile of the API process during /save (py-spy):\n" + profile_text)


if __name__ == "__main__":
    sys.exit(main())

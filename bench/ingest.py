"""Ingest acceptance: Discord-plugin traffic against /save, next to /noop and the naive design.

Run: .venv/bin/python -m bench.ingest [--quick] [--profile] [--metrics-cost]
         [--edits-per-turn K] [--compare-edits]

--edits-per-turn K re-sends K of each /save turn's known messages with another text (a user
edited them; no worker runs, so each is still buffered), and checks that /save counts each one
edited. --compare-edits adds a row, in every round, of /save with the same traffic (same seed,
its own agents) and no edits: the cost of K edits per turn, in one run.

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
from dataclasses import dataclass
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
NO_EDITS = "/save (same traffic, no edits)"
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


@dataclass(frozen=True)
class Target:
    """Where a row's requests go, and the load generator's traffic for it."""

    proc: Proc
    url: str
    path: str
    traffic: dict[str, Any]  # stream (default: the path's), seed, prefix, edits per turn


def _one(stack: Stack, gen: LoadGen, target: Target, requests: int, conc: int) -> dict[str, Any]:
    path = target.path
    api, redis_pid = target.proc.pid, stack.redis_pid()
    cpu0 = cpu_seconds(api), cpu_seconds(redis_pid)
    result = gen.run(
        cmd="http", url=target.url, path=path, requests=requests, concurrency=conc, **target.traffic
    )
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
        # at a core's worth (1 / req/s), the load generator and not the API sets the rate
        "loadgen_ms": result["cpu"] / requests * 1000,
        "accepted": result["accepted"],
        "sent_new": result["new"],
        "edited": result["edited"],
        "stale": result["stale"],
        "sent_edits": result["edits"],
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
    return Target(proc, url, "/save", {})


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
    targets = {path: Target(api, stack.api_url, path, {}) for path in PATHS}
    if args.edits_per_turn:
        targets["/save"] = Target(api, stack.api_url, "/save", {"edits": args.edits_per_turn})
    if args.compare_edits:
        # The /save stream's seed (the first stream made: 1) under other agent names.
        same = {"stream": NO_EDITS, "seed": 1, "prefix": "plain"}
        targets[NO_EDITS] = Target(api, stack.api_url, "/save", same)
    if args.metrics_cost:
        targets[METRICS_ON] = _start_twin(stack, metrics=True)
        targets[METRICS_OFF] = _start_twin(stack, metrics=False)
        scrape = (targets[METRICS_ON].url, args.scrape_every, stop)
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
    parser.add_argument(
        "--edits-per-turn", type=int, default=0, metavar="K", help="known messages edited per turn"
    )
    parser.add_argument(
        "--compare-edits", action="store_true", help="also /save with the same traffic unedited"
    )
    args = parser.parse_args(argv)
    if not 0 <= args.edits_per_turn <= 28:
        parser.error("--edits-per-turn: 0 to 28 (a turn re-sends 28-29 known messages)")
    paths = _paths(args)
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
            if NO_EDITS in targets:
                gen.run(cmd="warm", url=stack.api_url, **targets[NO_EDITS].traffic)
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
    shape = (rounds, requests, args.concurrency)
    _report(results, loop_rates, shape, args.edits_per_turn, profile_text)
    _report_edits(results, args.edits_per_turn)
    return 0


def _paths(args: argparse.Namespace) -> tuple[str, ...]:
    """The rows, in a round's order: the edit comparison's two next to each other."""
    paths: tuple[str, ...] = ("/noop", "/save", NO_EDITS, "/naive")
    if not args.compare_edits:
        paths = PATHS
    if args.metrics_cost:
        paths = (*paths, METRICS_ON, METRICS_OFF)
    return paths


def _report(
    results: dict[str, list[dict[str, Any]]],
    loop_rates: list[float],
    shape: tuple[int, int, int],
    edits: int,
    profile_text: str,
) -> None:
    rounds, requests, conc = shape  # rounds, requests per endpoint and round, connections
    noop_rps = median([r["rps"] for r in results["/noop"]])
    rows = []
    for path in results:
        rs = results[path]
        m = {k: median([r[k] for r in rs]) for k in rs[0]}
        rows.append(
            [
                f"POST {path}" + (f", {edits} of 30 edited" if edits and path == "/save" else ""),
                m["rps"],
                m["msgs"],
                m["new"],
                m["p50"],
                m["p99"],
                ratio(m["rps"], noop_rps),
                m["api_ms"],
                m["redis_ms"],
                m["loadgen_ms"],
            ]
        )
    loop = median(loop_rates)
    after_naive = list(results).index("/naive") + 1
    rows.insert(
        after_naive, ["send_task loop (1/msg)", loop / 30, loop, loop / 30 * 1.5] + [""] * 6
    )
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
                "load gen CPU ms/req",
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


def _report_edits(results: dict[str, list[dict[str, Any]]], edits: int) -> None:
    """The edits' check (each one counted edited, none stale) and, with --compare-edits, /save
    with and without them: medians, their ratio, and the median of the rounds' ratios."""
    for path, rs in results.items():
        sent, edited = sum(r["sent_edits"] for r in rs), sum(r["edited"] for r in rs)
        stale = sum(r["stale"] for r in rs)
        if not sent and not edited and not stale:
            continue
        note = "" if edited == sent and not stale else "  <-- NOT EVERY EDIT WAS COUNTED AS ONE"
        print(f"edits, {path}: {edited} of {sent} edits sent counted edited, {stale} stale{note}")
        if note:
            print(f"warning: {path}: {edited} edited and {stale} stale of {sent}", file=sys.stderr)
    if NO_EDITS not in results:
        return
    with_, without = results["/save"], results[NO_EDITS]
    accepted, sent_new = sum(r["accepted"] for r in without), sum(r["sent_new"] for r in without)
    print(f"edits: accepted {accepted} of {sent_new} new messages sent to {NO_EDITS}")
    for key, what in (
        ("rps", "req/s"),
        ("api_ms", "API CPU ms/req"),
        ("redis_ms", "Redis CPU ms/req"),
    ):
        a, b = [r[key] for r in with_], [r[key] for r in without]
        paired = median([ratio(x, y) for x, y in zip(a, b, strict=True)])
        print(
            f"edits: /save {what} with {edits} of 30 edited / without = "
            f"{ratio(median(a), median(b)):.3f} (medians {median(a):.2f} / {median(b):.2f}; "
            f"median of the rounds' ratios {paired:.3f})"
        )
    print("edits: /save req/s each round, with: " + ", ".join(f"{r['rps']:.0f}" for r in with_))
    print(
        "edits: /save req/s each round, without: " + ", ".join(f"{r['rps']:.0f}" for r in without)
    )


if __name__ == "__main__":
    sys.exit(main())

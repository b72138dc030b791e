"""Scrape cost: GET /metrics with 1,000 buffered conversations, and /save while it is scraped.

Run: .venv/bin/python -m bench.scrape [--conversations 1000] [--scrapes 50]

`memory-pool api` on its own (no worker or scheduler, so everything stays buffered), 1,000
conversations of 3 messages each over 5 agents. Then: /metrics timed back to back; /save
latency alone and while another client scrapes /metrics without pause (the scrape reads Redis
with pipelined commands, never a script, so /save's script is not held behind it).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import Any

import httpx

from bench.machine import describe
from bench.stack import Stack
from bench.stats import median, pct, ratio, table
from tests.support.deployment import parse_metrics, value

AGENTS = 5
PER_REQUEST = 10  # conversations (channels) in one /save


def _body(agent: int, first_channel: int, round_: int) -> dict[str, Any]:
    messages = [
        {
            "message_id": f"c{channel}-{round_}-{n}",
            "text": f"message {n} in channel {channel}: about the harbour and its lights",
            "ts": 1_718_000_000_000 + n * 1000,
            "channel_id": f"c{channel}",
            "speaker_kind": "user",
            "discord_user_id": "1",
        }
        for channel in range(first_channel, first_channel + PER_REQUEST)
        for n in range(3)
    ]
    return {"bot": f"agent{agent}", "messages": messages}


def fill(client: httpx.Client, conversations: int) -> None:
    for start in range(0, conversations, PER_REQUEST):
        body = _body(start // PER_REQUEST % AGENTS, start, 0)
        assert client.post("/save", json=body).status_code == 202


def time_scrapes(client: httpx.Client, scrapes: int) -> tuple[list[float], list[float]]:
    """Whole-request milliseconds, and the backlog's own Redis read (its gauge)."""
    total, redis_part = [], []
    for _ in range(scrapes):
        started = time.perf_counter()
        text = client.get("/metrics").text
        total.append((time.perf_counter() - started) * 1000)
        redis_part.append(value(parse_metrics(text), "memory_pool_backlog_read_duration_seconds"))
    return total, [s * 1000 for s in redis_part]


def save_latencies(client: httpx.Client, requests: int, round_: int) -> list[float]:
    latencies = []
    for n in range(requests):
        body = _body(n % AGENTS, 100_000 + n * PER_REQUEST, round_)
        body["messages"] = body["messages"][:1]
        started = time.perf_counter()
        assert client.post("/save", json=body).status_code == 202
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def _scrape_until(url: str, stop: threading.Event, count: list[int]) -> None:
    with httpx.Client(base_url=url, trust_env=False, timeout=30) as client:
        while not stop.is_set():
            client.get("/metrics")
            count[0] += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--scrapes", type=int, default=50)
    parser.add_argument("--saves", type=int, default=500)
    args = parser.parse_args(argv)
    print(describe())
    with Stack() as stack:
        stack.start_redis()
        stack.start_embedding(384)
        stack.start_api()
        with httpx.Client(base_url=stack.api_url, trust_env=False, timeout=30) as client:
            fill(client, args.conversations)
            samples = parse_metrics(client.get("/metrics").text)
            buffered = value(samples, "memory_pool_backlog_buffered_messages")
            total, redis_part = time_scrapes(client, args.scrapes)
            alone = save_latencies(client, args.saves, 1)
            stop, count = threading.Event(), [0]
            scraper = threading.Thread(target=_scrape_until, args=(stack.api_url, stop, count))
            scraper.start()
            try:
                scraped = save_latencies(client, args.saves, 2)
            finally:
                stop.set()
                scraper.join()
    _report(args, buffered, total, redis_part, alone, scraped, count[0])
    return 0


def _report(args: argparse.Namespace, buffered: float, total: list[float],
            redis_part: list[float], alone: list[float], scraped: list[float],
            scrapes_during: int) -> None:  # fmt: skip
    print(
        f"\n{args.conversations} buffered conversations ({buffered:.0f} messages, {AGENTS} "
        f"agents); {args.scrapes} scrapes back to back"
    )
    print(
        table(
            ["GET /metrics", "median ms", "p95 ms", "max ms"],
            [
                ["whole request", median(total), pct(total, 95), max(total)],
                [
                    "backlog read from Redis",
                    median(redis_part),
                    pct(redis_part, 95),
                    max(redis_part),
                ],
            ],
        )
    )
    print(f"\n/save (1 message) x {args.saves}, one client; scraped {scrapes_during} times during")
    print(
        table(
            ["/save", "p50 ms", "p99 ms", "p50 vs alone"],
            [
                ["alone", pct(alone, 50), pct(alone, 99), 1.0],
                [
                    "while /metrics is scraped nonstop",
                    pct(scraped, 50),
                    pct(scraped, 99),
                    ratio(pct(scraped, 50), pct(alone, 50)),
                ],
            ],
        )
    )


if __name__ == "__main__":
    sys.exit(main())

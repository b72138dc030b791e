"""Freshness: seconds from /save's answer until /retrieve returns the chunk.

Run: .venv/bin/python -m bench.freshness [--quick]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from typing import Any

import httpx

from bench.machine import describe
from bench.stack import Stack
from bench.stats import median, table
from bench.traffic import BASE_ID, START_MS, sentence

AGENTS_YAML = """\
agents:
  - name: freshdef
  - name: fresh1
    idle_flush_seconds: 1
"""
POLL_SECONDS = 0.02
TIMEOUT = 120.0


class Trials:
    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.http = httpx.Client(timeout=30, trust_env=False)
        self.rng = random.Random(5)
        self.seq = 0

    def body(self, bot: str, sizes: list[int]) -> dict[str, Any]:
        """A new conversation with messages of these lengths (none ends with '?')."""
        self.seq += 1
        msgs = []
        for k, size in enumerate(sizes):
            text = sentence(self.rng, size, size).rstrip("?") + "."
            msgs.append(
                {
                    "message_id": str(BASE_ID + self.seq * 100 + k),
                    "text": text,
                    "ts": START_MS + k * 1000,
                    "speaker_kind": ("user", "self")[k % 2],
                    "discord_user_id": "111",
                    "channel_id": f"fresh{self.seq}",
                }
            )
        return {"bot": bot, "messages": msgs}

    def run(self, bodies: list[dict[str, Any]]) -> list[float]:
        """Save every body, then poll /retrieve until each one's chunk comes back."""
        pending: dict[int, float] = {}
        for i, body in enumerate(bodies):
            r = self.http.post(f"{self.stack.api_url}/save", json=body)
            pending[i] = time.perf_counter()
            assert r.status_code == 202 and r.json()["accepted"] == len(body["messages"]), r.text
        found: dict[int, float] = {}
        deadline = time.monotonic() + TIMEOUT
        while pending and time.monotonic() < deadline:
            for i in list(pending):
                if self._visible(bodies[i]):
                    found[i] = time.perf_counter() - pending.pop(i)
            time.sleep(POLL_SECONDS)
        if pending:
            raise RuntimeError(f"{len(pending)} chunks never became visible")
        return [found[i] for i in range(len(bodies))]

    def _visible(self, body: dict[str, Any]) -> bool:
        first = body["messages"][0]
        query = {"bot": body["bot"], "query_text": first["text"], "limit": 10, "score_threshold": 0}
        r = self.http.post(f"{self.stack.api_url}/retrieve", json=query)
        r.raise_for_status()
        return any(
            first["message_id"] in h["payload"].get("messageIdList", []) for h in r.json()["hits"]
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer trials; no 60 s idle case")
    parser.add_argument("--trials", type=int, default=None)
    args = parser.parse_args(argv)
    n = args.trials or (3 if args.quick else 9)
    print(describe())
    rows: list[list[Any]] = []  # agent setting, case, trials, seconds
    with Stack(AGENTS_YAML) as stack:
        stack.start_redis()
        stack.start_embedding(384)
        stack.start_qdrant()
        stack.start_api()
        stack.start_worker()
        stack.start_scheduler()
        t = Trials(stack)
        t.run([t.body("fresh1", [300, 300])])  # warm-up: collection, connections
        t.run([t.body("freshdef", [300, 300])])
        for bot, label in (("freshdef", "default (idle 60 s)"), ("fresh1", "idle_flush_seconds=1")):
            closed = [t.run([t.body(bot, [300, 300])])[0] for _ in range(n)]
            rows.append([label, "chunk closed by size (2 x 300 chars)", "sequential", closed])
        opened = [t.run([t.body("fresh1", [100])])[0] for _ in range(n)]
        rows.append(["idle_flush_seconds=1", "open chunk (1 x 100 chars)", "sequential", opened])
        if not args.quick:
            idle = t.run([t.body("freshdef", [100]) for _ in range(5)])
            rows.append(
                [
                    "default (idle 60 s)",
                    "open chunk (1 x 100 chars)",
                    "5 conversations at once",
                    idle,
                ]
            )
    print()
    print(
        "Freshness: /save answered -> chunk returned by /retrieve (polled every 20 ms); "
        "1 worker (solo), scheduler interval 0.25 s (default), embedding test server, "
        "Qdrant test server; seconds"
    )
    print(
        table(
            ["agent setting", "case", "trials", "n", "median s", "min s", "max s"],
            [[a, b, c, len(v), median(v), min(v), max(v)] for a, b, c, v in rows],
        )
    )
    if args.quick:
        print("(--quick skips the default-idle open chunk, which takes 60 s by design)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

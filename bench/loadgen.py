"""Load generator in its own process: `python -m bench.loadgen`, driven by JSON lines on stdin.

Commands: {"cmd": "warm", "url"} sends every channel's first full window to /save;
{"cmd": "http", "url", "path", "requests", "concurrency"} replays Discord turns, with "edits": K
of each turn's known messages re-sent with another text;
{"cmd": "send_task", "broker", "messages"} is the naive producer: one Celery task per message.
Each answers one JSON line on stdout. The traffic state lives on across commands, one per
"stream" (default: the path), made with the command's "seed" and "prefix" when given.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import httpx

from bench.traffic import DiscordTraffic


def _previous(channels: list[str]) -> list[int | None]:
    """For each body, the one before it of the same channel (None for a channel's first)."""
    last: dict[str, int] = {}
    before: list[int | None] = []
    for i, channel in enumerate(channels):
        before.append(last.get(channel))
        last[channel] = i
    return before


async def _post_all(
    url: str, bodies: list[bytes], channels: list[str], concurrency: int
) -> dict[str, Any]:
    """POST the bodies over `concurrency` connections, in order, a channel's one at a time (as
    the plugin sends a channel's turns: an edit re-sent by a later turn never arrives first)."""
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    counts = {"accepted": 0, "edited": 0, "stale": 0}
    queue = iter(range(len(bodies)))
    before = _previous(channels)
    done = [asyncio.Event() for _ in bodies]
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    headers = {"content-type": "application/json"}
    async with httpx.AsyncClient(limits=limits, timeout=30, trust_env=False) as client:

        async def worker() -> None:
            for i in queue:
                previous = before[i]
                if previous is not None:
                    await done[previous].wait()
                started = time.perf_counter()
                try:
                    response = await client.post(url, content=bodies[i], headers=headers)
                finally:
                    done[i].set()
                latencies.append((time.perf_counter() - started) * 1000)
                key = str(response.status_code)
                statuses[key] = statuses.get(key, 0) + 1
                if response.status_code == 202:
                    answer = response.json()
                    for name in counts:  # edited and stale are left out when 0
                        counts[name] += int(answer.get(name, 0))

        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {
        "elapsed": elapsed,
        "cpu": cpu,  # this process's own: whether it, not the server, sets the pace
        "latencies_ms": latencies,
        "statuses": statuses,
        **counts,
    }


def http(traffic: DiscordTraffic, cmd: dict[str, Any]) -> dict[str, Any]:
    turns = [traffic.turn(cmd.get("edits", 0)) for _ in range(cmd["requests"])]
    bodies = [json.dumps(turn.body).encode() for turn in turns]
    channels = [_channel(turn.body) for turn in turns]
    result = asyncio.run(_post_all(cmd["url"] + cmd["path"], bodies, channels, cmd["concurrency"]))
    result["new"] = sum(turn.new for turn in turns)
    result["edits"] = sum(turn.edited for turn in turns)
    result["messages"] = sum(len(turn.body["messages"]) for turn in turns)
    return result


def warm(traffic: DiscordTraffic, cmd: dict[str, Any]) -> dict[str, Any]:
    filled = [traffic.fill(channel) for channel in traffic.channels]
    bodies = [json.dumps(body).encode() for body in filled]
    channels = [_channel(body) for body in filled]
    return asyncio.run(_post_all(cmd["url"] + "/save", bodies, channels, 4))


def _channel(body: dict[str, Any]) -> str:
    return f"{body['bot']} {body['messages'][0]['channel_id']}"


def send_task(traffic: DiscordTraffic, cmd: dict[str, Any]) -> dict[str, Any]:
    """A loop of app.send_task(...), one per message, against the Redis broker."""
    from celery import Celery

    from bench.noop_app import NAIVE_QUEUE, NAIVE_TASK

    app = Celery("bench_naive", broker=cmd["broker"], set_as_current=False)
    app.conf.update(task_serializer="json", broker_connection_retry_on_startup=True)
    messages = [traffic.message(traffic.channels[i % 100]) for i in range(cmd["messages"])]
    app.send_task(NAIVE_TASK, args=["warm", messages[0]], queue=NAIVE_QUEUE)  # connect first
    started = time.perf_counter()
    for message in messages:
        app.send_task(NAIVE_TASK, args=["bench0", message], queue=NAIVE_QUEUE)
    elapsed = time.perf_counter() - started
    app.close()
    return {"elapsed": elapsed, "messages": len(messages)}


def main() -> int:
    # /save gets its own traffic, so every window it sees holds only 1-2 ids it has not seen
    traffics: dict[str, DiscordTraffic] = {}
    commands = {"http": http, "warm": warm, "send_task": send_task}
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        key = cmd.get("stream") or (
            cmd.get("path", "/save") if cmd["cmd"] != "send_task" else "task"
        )
        if key not in traffics:
            seed, prefix = cmd.get("seed", len(traffics) + 1), cmd.get("prefix", "bench")
            traffics[key] = DiscordTraffic(seed=seed, prefix=prefix)
        traffic = traffics[key]
        result = commands[cmd["cmd"]](traffic, cmd)
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

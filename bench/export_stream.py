"""The export's stream on the event loop: each line read in a turn of Starlette's threadpool
(as `StreamingResponse` reads a plain iterator, the code before the export took the agent's
share) against `api/routes/pool_transfer._in_share`, which reads EXPORT_LINES_AT_ONCE lines a
turn in the agent's share. Lines of an empty store's size, so the turns are what is timed.

    .venv/bin/python -m bench.export_stream [--lines 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator, Iterator

from starlette.concurrency import iterate_in_threadpool

from api.agent_threads import AgentCalls, AgentThreads
from api.routes.pool_transfer import EXPORT_LINES_AT_ONCE, _in_share
from bench.machine import describe
from bench.stats import median, ratio


def _lines(count: int) -> Iterator[str]:
    return (f'{{"kind": "point", "id": {n}, "payload": {{}}}}\n' for n in range(count))


async def _drain(stream: AsyncIterator[str]) -> float:
    started = time.perf_counter()
    async for _ in stream:
        pass
    return time.perf_counter() - started


async def _rounds(lines: int, rounds: int) -> tuple[list[float], list[float]]:
    before, after = [], []
    for _ in range(rounds):  # alternating, so a slow spell weighs on both
        before.append(await _drain(iterate_in_threadpool(_lines(lines))) / lines * 1e6)
        share = AgentCalls(AgentThreads(4), "mem_bench")
        after.append(await _drain(_in_share(share, _lines(lines))) / lines * 1e6)
    return before, after


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    print(describe())
    before, after = asyncio.run(_rounds(options.lines, options.rounds))
    print(f"us per line, {options.lines} lines, medians of {options.rounds} rounds:")
    print(f"  a thread's turn per line (Starlette): {median(before):.1f}")
    print(f"  {EXPORT_LINES_AT_ONCE} lines a turn in the share: {median(after):.1f}")
    print(f"  ratio: {ratio(median(after), median(before)):.3f}")


if __name__ == "__main__":
    main()

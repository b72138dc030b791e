"""The save script's cost in instructions, which a loaded machine does not change: Redis runs
under callgrind, one Discord-shaped request (30 messages, all known: the plugin's common case)
is sent N1 and then N2 times to fresh servers, and (total2 - total1) / (N2 - N1) is one call's
instructions, start-up and warm-up cancelled out. `--code DIR` measures another checkout's
script and arguments (e.g. a `git archive` of main), to compare in one run.

    .venv/bin/python -m bench.save_script_cost [--code DIR] [--calls 100,600]

Needs valgrind (Debian package valgrind) and redis-server on the PATH.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WARM_CALLS = 50


def _request(traffic_cls: Any) -> dict[str, Any]:
    traffic = traffic_cls(channels=1, agents=1)
    traffic.fill(traffic.channels[0])
    # the window again, all known: what a turn re-sends, less its 1-2 new messages
    return {"bot": traffic.channels[0].agent, "messages": list(traffic.channels[0].window)}


def _script_call() -> tuple[str, list[str], list[str]]:
    """This checkout's (sys.path's) save script, keys and arguments for one all-known request."""
    from api.ingest import ingest
    from api.schemas import SaveRequest
    from bench.traffic import DiscordTraffic
    from shared.agents import Agents
    from shared.state.buffers import AgentRef, ConversationSettings, save_call
    from shared.state.scripts import SOURCES

    body = SaveRequest.model_validate_json(json.dumps(_request(DiscordTraffic)))
    agent = Agents([], accept_unlisted=True).get(body.bot)
    conv = ConversationSettings(min_chars=10**9, gap_seconds=10**9, idle_seconds=3600)
    batches = ingest(body, agent, "discord").batches
    keys, args = save_call(AgentRef(agent.name, agent.collection_name), batches, conv, 3600)
    return SOURCES["save"], keys, args


def _instructions(script: str, keys: list[str], args: list[str], calls: int, port: int) -> int:
    import redis

    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "callgrind.out"
        redis_argv = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
                      "--dir", folder]  # fmt: skip
        argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *redis_argv]
        server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=port)
        for _ in range(300):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        save = client.register_script(script)
        for _ in range(WARM_CALLS + calls):  # the first call stores the messages
            save(keys=keys, args=args)
        with contextlib.suppress(redis.ConnectionError):  # it closes the connection
            client.shutdown(nosave=True)
        server.wait(timeout=120)
        found = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.M)
        if found is None:
            raise RuntimeError("callgrind wrote no totals")
        return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--code", help="a checkout to measure (default: this one)")
    parser.add_argument("--calls", default="100,600", help="the two call counts")
    options = parser.parse_args()
    if options.code:
        sys.path.insert(0, options.code)
    first, second = (int(n) for n in options.calls.split(","))
    script, keys, args = _script_call()
    port = 27000 + os.getpid() % 1000
    low = _instructions(script, keys, args, first, port)
    high = _instructions(script, keys, args, second, port)
    code = options.code or "this checkout"
    print(f"{code}: {(high - low) // (second - first):,} instructions per save call "
          f"(30 known ids; {first} and {second} calls)")  # fmt: skip


if __name__ == "__main__":
    main()

"""The Redis step of /save alone: client CPU, wall time and Redis CPU per Discord-shaped request
(30 messages, 28 re-sent), for this checkout's code or another's (`--code DIR`, e.g. a
`git archive` of main), so a change to the save script is compared in the same minute.

    .venv/bin/python -m bench.save_call [--code DIR] [--requests 3000]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from bench import other_code


def main() -> None:
    options = other_code.parse(__doc__, requests=3000)
    import redis

    import shared.state.buffers
    from shared.format.messages import Message
    from shared.state.buffers import AgentRef, Buffers, ConversationSettings
    from shared.state.conversations import ConversationRef
    from tests.support.redis_server import RedisServer

    server = RedisServer().start()
    try:
        client = redis.Redis.from_url(server.url)
        buffers = Buffers(client, dedupe_ttl_seconds=3600, lease_seconds=30)
        conv = ConversationSettings(min_chars=100_000, gap_seconds=3600, idle_seconds=3600)
        agent = AgentRef("Polaris", "mem_polaris")
        requests = []
        for n in range(options.requests + 200):
            ref = ConversationRef("mem_polaris", "discord", channel_id=str(n % 100))
            # 2 new per channel per round; ids unique across channels, as snowflakes are
            newest = 1_200_000_000_000_000_000 + (n % 100) * 10**9 + (n // 100) * 2
            text = "a message of a Discord channel, about as long as most of them are " * 2
            # a re-sent id keeps its text (a changed one would be an edit)
            messages = [Message(str(newest - 29 + i), f"{text}{newest - 29 + i}",
                                1_700_000_000_000 + i, "Ann")
                        for i in range(30)]  # fmt: skip
            requests.append(_request(shared.state.buffers, ref, messages))
        save = _saver(buffers)
        for request in requests[:200]:  # warm: the channels' earlier messages are known
            save(agent, request, conv)
        before = client.info("cpu")
        cpu, wall = time.process_time(), time.perf_counter()
        for request in requests[200:]:
            save(agent, request, conv)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        after = client.info("cpu")
        redis_cpu = sum(after[k] - before[k] for k in ("used_cpu_sys", "used_cpu_user"))
        n = options.requests
        print(f"code: {sys.modules['shared.state.buffers'].__file__}")
        print(f"client CPU {1000 * cpu / n:.3f} ms/req, wall {1000 * wall / n:.3f} ms/req, "
              f"Redis CPU {1000 * redis_cpu / n:.3f} ms/req ({n} requests)")  # fmt: skip
    finally:
        server.stop()


def _request(code: Any, ref: Any, messages: list[Any]) -> list[Any]:
    """One request's messages as this code's save takes them: one batch per conversation, or
    (code before SaveBatches, run with --code) one IncomingMessage each."""
    if hasattr(code, "SaveBatches"):
        batches = code.SaveBatches()
        for message in messages:
            batches.add(ref, message, "guild1")
        return list(batches)
    return [code.IncomingMessage(ref, m, "guild1") for m in messages]


def _saver(buffers: Any) -> Callable[..., object]:
    """/save's Redis step, synchronously: the code's own Buffers.save where it has one (an
    older version run with --code), else the script and arguments the API's AsyncSaver sends."""
    if hasattr(buffers, "save"):
        return buffers.save
    from shared.state.buffers import save_call
    from shared.state.scripts import SOURCES

    script = buffers.redis.register_script(SOURCES["save"])

    def save(agent: Any, incoming: Any, conv: Any) -> object:
        script_keys, args = save_call(agent, incoming, conv, buffers.dedupe_ttl)
        return script(keys=script_keys, args=args)

    return save


if __name__ == "__main__":
    main()

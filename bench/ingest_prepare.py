"""/save's own Python work per request, in process: `api.ingest.ingest` on Discord-plugin turns
(30 messages, 28 re-sent), each body freshly parsed as /save parses it, so no string is shared
between requests as it would not be between HTTP requests. Medians of repeated passes; `--code
DIR` measures another checkout (e.g. a `git archive` of an older commit) in the same run.

    .venv/bin/python -m bench.ingest_prepare [--code DIR] [--requests 3000] [--passes 7]
"""

from __future__ import annotations

import json
import statistics
import time

from bench import other_code


def main() -> None:
    options = other_code.parse(__doc__, requests=3000, passes=7)
    from api.ingest import ingest
    from api.schemas import SaveRequest
    from bench.traffic import DiscordTraffic
    from shared.agents import Agents

    traffic = DiscordTraffic(seed=1)
    warm = [json.dumps(traffic.fill(channel)).encode() for channel in traffic.channels]
    bodies = []
    for _ in range(options.requests):
        turn = traffic.turn()
        bodies.append(json.dumps(turn[0] if isinstance(turn, tuple) else turn.body).encode())
    agents = Agents([], accept_unlisted=True)
    for body in warm:  # the channels' windows were seen before, as a running API has seen them
        request = SaveRequest.model_validate_json(body)
        ingest(request, agents.get(request.bot), "discord")
    per_request = []
    for _ in range(options.passes):
        requests = [SaveRequest.model_validate_json(body) for body in bodies]
        started = time.perf_counter()
        for request in requests:
            ingest(request, agents.get(request.bot), "discord")
        per_request.append((time.perf_counter() - started) / len(requests) * 1e6)
    code = options.code or "this checkout"
    median = statistics.median(per_request)
    print(f"{code}: ingest {median:.0f} us per request (median of {options.passes} passes of "
          f"{options.requests}; min {min(per_request):.0f})")  # fmt: skip


if __name__ == "__main__":
    main()

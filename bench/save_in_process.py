"""/save's and /noop's CPU per request in process: Discord-plugin turns (30 messages, 28 re-sent)
through the bench app (bench/noop_app.py) with httpx's ASGI transport and a real Redis, timed
by the event loop thread's CPU, so load moves it less than the HTTP bench. Passes alternate
/noop and /save; `--code DIR` measures another checkout (a `git archive` of an older commit).

    .venv/bin/python -m bench.save_in_process [--code DIR] [--requests 1500] [--passes 4]
"""

from __future__ import annotations

import asyncio
import statistics
import time

from bench import other_code
from bench.in_process import app_redis, discord_bodies

JSON = {"content-type": "application/json"}


async def _measure(requests: int, passes: int) -> dict[str, list[float]]:
    import httpx

    from bench.noop_app import build
    from shared.settings import Settings

    app = build(Settings())
    warm, bodies = discord_bodies(requests)
    per_request: dict[str, list[float]] = {"/noop": [], "/save": []}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            for body in warm + bodies[:200]:  # the channels' windows seen before, as in service
                await client.post("/save", content=body, headers=JSON)
            for n in range(passes):
                for path in ("/noop", "/save") if n % 2 == 0 else ("/save", "/noop"):
                    started = time.thread_time()
                    for body in bodies:
                        answer = await client.post(path, content=body, headers=JSON)
                        assert answer.status_code == 202, answer.text
                    spent = time.thread_time() - started
                    per_request[path].append(spent / len(bodies) * 1e6)
    return per_request


def main() -> None:
    options = other_code.parse(__doc__, requests=1500, passes=4)
    with app_redis():
        found = asyncio.run(_measure(options.requests, options.passes))
    noop, save = (statistics.median(found[path]) for path in ("/noop", "/save"))
    print(f"{options.code or 'this checkout'}: /noop {noop:.0f} us, /save {save:.0f} us of CPU "
          f"per request (medians of {options.passes} passes of {options.requests}; "
          f"/save {', '.join(f'{x:.0f}' for x in found['/save'])})")  # fmt: skip


if __name__ == "__main__":
    main()

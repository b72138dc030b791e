"""Where a /save's time goes, part by part, on the event loop uvicorn runs (uvloop): Discord-
plugin turns (30 messages, 28 re-sent) through the bench app (bench/noop_app.py) with httpx's
ASGI transport and a real Redis, each part of the route timed by the loop thread's CPU, and
the save script's own time and Redis' CPU per /save read from Redis (INFO).

    .venv/bin/python -m bench.save_parts [--code DIR] [--requests 2500]

A part is one function of the route, wrapped where the route looks it up; what no part holds
(routing, the response, the transport) is "rest". The script call's CPU includes the loop's
turn while the reply is awaited; its wall time is printed beside it. Sampling profilers weigh
these parts otherwise (py-spy put a tenth of /save in asyncio.wait_for, which costs 4 us under
uvloop): this bench is the one to trust for sizes.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from bench import other_code
from bench.in_process import app_redis, discord_bodies

JSON = {"content-type": "application/json"}
# (module, attribute): the route's parts, as the route's module or the saver looks them up.
PARTS = (
    ("api.routes.save", "save_body"),
    ("api.routes.save", "check_limits"),
    ("api.routes.save", "agent_for"),
    ("api.routes.save", "ingest"),
    ("shared.state.buffers", "save_call"),
    ("shared.state.buffers", "save_counts"),
    ("api.metrics", "ApiMeters.saved"),
)


def _timed(
    spent: defaultdict[str, float], name: str, fn: Callable[..., Any], *, awaited: bool = False
) -> Callable[..., Any]:
    if awaited or asyncio.iscoroutinefunction(fn):

        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return await fn(*args, **kwargs)
            finally:
                spent[name] += time.thread_time() - started

        return timed_async

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] += time.thread_time() - started

    return timed


def _wrap_parts(spent: defaultdict[str, float]) -> None:
    import importlib

    for module_name, attribute in PARTS:
        owner: Any = importlib.import_module(module_name)
        *path, name = attribute.split(".")
        for step in path:
            owner = getattr(owner, step)
        if hasattr(owner, name):  # an older checkout may not have the part
            setattr(owner, name, _timed(spent, attribute, getattr(owner, name)))


def _redis_cpu(client: Any) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


async def _measure(requests: int, redis_url: str) -> dict[str, float]:
    import httpx
    import redis

    from bench.noop_app import build
    from shared.settings import Settings

    spent: defaultdict[str, float] = defaultdict(float)
    _wrap_parts(spent)
    app = build(Settings())
    warm, bodies = discord_bodies(requests + 300)
    admin = redis.Redis.from_url(redis_url)
    out: dict[str, float] = {}
    async with app.router.lifespan_context(app):
        saver = app.state.saver
        saver._save = _timed(spent, "script call", saver._save, awaited=True)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            for body in warm + bodies[:300]:  # the channels' windows seen before, as in service
                await client.post("/save", content=body, headers=JSON)
            spent.clear()
            admin.config_resetstat()
            redis_before = _redis_cpu(admin)
            started, wall = time.thread_time(), time.perf_counter()
            for body in bodies[300:]:
                answer = await client.post("/save", content=body, headers=JSON)
                assert answer.status_code == 202, answer.text
            out["/save"] = time.thread_time() - started
            out["/save wall"] = time.perf_counter() - wall
            out["redis CPU"] = _redis_cpu(admin) - redis_before
            stats = admin.info("commandstats")["cmdstat_evalsha"]
            out["script in Redis"] = float(stats["usec_per_call"]) * float(stats["calls"]) / 1e6
            parts = dict(spent)
            started = time.thread_time()
            for body in bodies[300:]:
                await client.post("/noop", content=body, headers=JSON)
            out["/noop"] = time.thread_time() - started
    out.update(parts)
    return {name: seconds / requests * 1e6 for name, seconds in out.items()}


def main() -> None:
    options = other_code.parse(__doc__, requests=2500)
    import uvloop

    with app_redis() as server:
        found = uvloop.run(_measure(options.requests, server.url))
    parts = sum(found.get(attribute, 0.0) for _, attribute in PARTS) + found["script call"]
    print(f"{options.code or 'this checkout'}: us per request, {options.requests} requests, uvloop")
    save, wall = found["/save"], found["/save wall"]
    print(f"  /noop {found['/noop']:.0f}; /save {save:.0f} (wall {wall:.0f})")
    for _, attribute in PARTS:
        if attribute in found:
            print(f"    {attribute}: {found[attribute]:.1f}")
    print(f"    script call: {found['script call']:.1f}")
    print(f"    rest: {save - parts:.1f}")
    print(f"  Redis: the script {found['script in Redis']:.1f}, "
          f"Redis CPU {found['redis CPU']:.1f} per /save")  # fmt: skip
    sys.stdout.flush()


if __name__ == "__main__":
    main()

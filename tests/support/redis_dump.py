"""Load a Redis dump fixture (tests/fixtures/redis_*.json): keys with their type, value and PTTL,
as written by an earlier version of memory-pool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import redis


def load_dump(client: redis.Redis, path: Path) -> dict[str, Any]:
    dump: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    for entry in dump["keys"]:
        key, kind, value = entry["key"], entry["type"], entry["value"]
        if kind == "string":
            client.set(key, value)
        elif kind == "list":
            client.rpush(key, *value)
        elif kind == "set":
            client.sadd(key, *value)
        elif kind == "hash":
            client.hset(key, mapping=value)
        elif kind == "zset":
            client.zadd(key, dict(value))
        if entry["pttl"] > 0:
            client.pexpire(key, entry["pttl"])
    return dump

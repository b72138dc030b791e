"""Buffered data as the code before the door stored it, written straight into Redis.

The door now refuses the poison that used to get in (a `ts` in microseconds, a 1,024-character
agent name), but a Redis written before it may still hold some: these write such a conversation
the way the save script did, so the flush has to cope with it.
"""

from __future__ import annotations

import json
import time
from typing import Any

import redis

from shared.state import keys
from shared.state.conversations import ConversationRef

SOURCE = "discord"
# 2024-06-10T06:13:20Z in milliseconds; the same moment in microseconds is in year 56411.
BASE_TS = 1_718_000_000_000
MICROSECONDS_TS = 1_718_000_000_000_000
LONG = "the harbour lights were far away and the keeper counted every single one of them"


def record(mid: str, ts: int, text: str = LONG, speaker: str = "Alex") -> dict[str, Any]:
    """A buffered message in the save script's short-key form."""
    return {"i": mid, "t": f"{text} ({mid})", "s": speaker, "ts": ts, "z": len(text) + 20}


def buffer_legacy(
    client: redis.Redis,
    *,
    agent: str,
    collection: str,
    channel: str,
    records: list[dict[str, Any]],
    due_at: int = 0,
) -> str:
    """One conversation with these buffered records, due at `due_at` (Unix ms); its key."""
    key = ConversationRef(collection, SOURCE, channel_id=channel).key
    now = int(time.time() * 1000)
    pipe = client.pipeline(transaction=True)
    pipe.hset(
        keys.meta(key),
        mapping={"agent": agent, "source": SOURCE, "channel": channel, "last": now,
                 "newest": max(int(r.get("ts", 0)) for r in records),
                 "chars": sum(int(r.get("z", 0)) for r in records)},
    )  # fmt: skip
    for item in records:
        pipe.rpush(keys.buffer(key), json.dumps(item, separators=(",", ":")))
        pipe.set(keys.seen(collection, SOURCE, str(item.get("i"))), key, ex=86_400)
    pipe.sadd(keys.conversations(collection), key)
    pipe.hsetnx(keys.NAMES, collection, agent)
    pipe.zadd(keys.DUE, {key: due_at})
    pipe.execute()
    return key

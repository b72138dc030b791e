"""A Redis lock held for a block of work: taken with SET NX PX, given back only by its holder."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from shared.state.scripts import SOURCES

# Compare and delete in one step: a holder whose lock expired and was taken by another process
# must not delete the other's lock (a GET then DEL could, between the two calls).
_RELEASE = SOURCES["lock_release"]


@contextmanager
def held(
    client: redis.Redis, key: str, *, ttl_ms: int, wait_seconds: float = 0.0, poll: float = 0.05
) -> Iterator[bool]:
    """Hold `key` while the block runs; yields False (and holds nothing) when another holder
    kept it for `wait_seconds`."""
    token = uuid.uuid4().hex
    deadline = time.monotonic() + wait_seconds
    while not client.set(key, token, nx=True, px=ttl_ms):
        if time.monotonic() >= deadline:
            yield False
            return
        time.sleep(poll)
    try:
        yield True
    finally:
        client.eval(_RELEASE, 1, key, token)

"""Dedupe marks as tests age them: a mark's expiry is in its value too (save.lua reads only the
value, one GET per re-sent id), so a test that runs a mark down changes both."""

from __future__ import annotations

import time

import redis


def run_down(r: redis.Redis, key: str, ms_left: int) -> None:
    """The mark at `key` as if it had `ms_left` of its expiry left."""
    value = r.get(key)
    assert value is not None, key
    text = value.decode() if isinstance(value, bytes) else value
    state, fingerprint, _, member = text.split(" ", 3)
    expires = int(time.time() * 1000) + ms_left
    r.set(key, f"{state} {fingerprint} {expires} {member}", px=ms_left)


def member_of(r: redis.Redis, key: str) -> str:
    """The conversation a mark names."""
    value = r.get(key)
    text = value.decode() if isinstance(value, bytes) else str(value)
    return text.split(" ", 3)[3]

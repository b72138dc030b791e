"""Dedupe marks as tests age them: a mark holds its expiry's step in its value too (save.lua
reads only the value, one GET per re-sent id), so a test that runs a mark down changes both."""

from __future__ import annotations

import time

import redis

from shared.state.buffers import refresh_after_ms


def step_of(expires_ms: int, ttl_seconds: int) -> int:
    """The step save.lua writes into a mark that expires at `expires_ms`, for this TTL."""
    return expires_ms // refresh_after_ms(ttl_seconds)


def run_down(
    r: redis.Redis, key: str, ms_left: int, *, ttl_seconds: int, now_ms: int | None = None
) -> None:
    """The mark at `key` as if it had been written with `ms_left` of its expiry left, at
    `now_ms` (the script's clock, when a test sets it; else the real one)."""
    value = r.get(key)
    assert value is not None, key
    text = value.decode() if isinstance(value, bytes) else value
    state, fingerprint, _, member = text.split(" ", 3)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    step = step_of(now + ms_left, ttl_seconds)
    r.set(key, f"{state} {fingerprint} {step} {member}", px=ms_left)


def member_of(r: redis.Redis, key: str) -> str:
    """The conversation a mark names."""
    value = r.get(key)
    text = value.decode() if isinstance(value, bytes) else str(value)
    return text.split(" ", 3)[3]

"""The Redis lock helper: one holder at a time, and only the holder gives it back."""

from __future__ import annotations

import redis

from shared.state.lock import held


def test_one_holder_and_only_the_holder_releases(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        with held(client, "mp:test:lock", ttl_ms=10_000) as got:
            assert got
            with held(client, "mp:test:lock", ttl_ms=10_000, wait_seconds=0.1) as again:
                assert not again
            assert client.exists("mp:test:lock")  # the refused caller did not release it
        assert not client.exists("mp:test:lock")
        with held(client, "mp:test:lock", ttl_ms=10_000) as got:
            # Our lock expired and another process took it: leaving must not delete theirs.
            client.set("mp:test:lock", "someone-else")
        assert client.get("mp:test:lock") == b"someone-else"
    finally:
        client.close()

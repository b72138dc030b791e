"""A text-decoding client on the test's own Redis (tests/conftest.py's redis_url)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()

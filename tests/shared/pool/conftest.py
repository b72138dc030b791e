"""The pool's transfer tests: a store of each kind and the dedupe marks in the test Redis."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from shared.pool.marks import RedisMarks
from shared.store.interface import Store
from tests.support.stores import KINDS, open_store


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with open_store(request.param, tmp_path) as opened:
        yield opened


@pytest.fixture
def marks(redis_url: str) -> Iterator[RedisMarks]:
    client = redis.Redis.from_url(redis_url)
    yield RedisMarks(client)
    client.close()

"""An empty store of each kind (Qdrant Edge and a server), for the tests that write their own
chunks (tests/shared/store/test_cjk_terms.py `write_chunks`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.store.interface import Store
from tests.support.stores import KINDS, open_store


@pytest.fixture(params=KINDS)
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with open_store(request.param, tmp_path) as store:
        yield store

"""One live deployment for the package: starting its processes costs seconds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.deployment import Deployment, live_deployment


@pytest.fixture(scope="package")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with live_deployment(tmp_path_factory.mktemp("observability")) as up:
        yield up

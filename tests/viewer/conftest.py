"""A live memory-pool (uvicorn, a Celery worker, the scheduler, real Redis) and a real headless
Chromium pointed at its /ui page."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tests.support.browser import chromium
from tests.support.embedding_server import EmbeddingServer
from tests.support.live_server import Live, live_memory_pool
from tests.support.viewer_page import ROOT, agents_file


@pytest.fixture
def live(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[Live]:
    with live_memory_pool(redis_url, embeddings.url, tmp_path, agents_file(keys=False)) as up:
        yield up


@pytest.fixture
def live_with_keys(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[Live]:
    with live_memory_pool(redis_url, embeddings.url, tmp_path, agents_file(keys=True)) as up:
        yield up


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    with chromium(tmp_path / "chromium-profile") as driver:
        yield driver


@pytest.fixture
def shot(tmp_path: Path) -> Callable[[WebDriver, str], Path]:
    """Saves a screenshot: into docs/screenshots/ when MEMORY_POOL_SCREENSHOTS=1 (how README's
    were made, once), else beside the test, so a normal run leaves the tree clean."""
    folder = (
        ROOT / "docs" / "screenshots" if os.environ.get("MEMORY_POOL_SCREENSHOTS") else tmp_path
    )
    folder.mkdir(parents=True, exist_ok=True)

    def take(driver: WebDriver, name: str) -> Path:
        path = folder / f"{name}.png"
        assert driver.save_screenshot(str(path)), f"no screenshot {path}"
        assert path.stat().st_size > 1000
        return path

    return take

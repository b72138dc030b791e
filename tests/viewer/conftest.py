"""A live memory-pool (uvicorn, a Celery worker, the scheduler, real Redis) and a real headless
Chromium pointed at its /ui page."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.client.live_server import Live, live_memory_pool
from tests.support.browser import chromium
from tests.support.embedding_server import EmbeddingServer

ROOT = Path(__file__).resolve().parents[2]
WAIT_SECONDS = 15
OPS_KEY = "ops-key-0123456789abcdef"
MYTHOS_KEY = "mythos-key-0123456789abc"
BASE_TS = 1_718_000_000_000
HOUR = 3600_000


def agents_file(*, keys: bool) -> dict[str, Any]:
    agents = [{"name": "Mythos", "self_speaker": "Mythos"}, {"name": "Other"}]
    if not keys:
        return {"agents": agents}
    for agent in agents:
        agent["require_key"] = True
    return {
        "agents": agents,
        "api_keys": [
            {"name": "ops", "key": OPS_KEY},
            {"name": "mythos-only", "key": MYTHOS_KEY, "agents": ["Mythos"]},
        ],
    }


def message(mid: str, n: int, *, channel: str = "c1", user: str = "1", text: str = "") -> dict:
    body = text or f"message {mid} about the lighthouse keeper and the harbour lights"
    return {"message_id": mid, "discord_user_id": user, "speaker_name": f"user{user}",
            "text": body, "ts": BASE_TS + n * 7 * HOUR, "channel_id": channel}  # fmt: skip


def seed(live: Live, headers: dict[str, str] | None = None) -> None:
    """Seven chunks of Mythos (each message its own chunk: 7 hours apart) in channels c1/c2,
    by users 1/2, and one of Other."""
    client = live.stack.client
    for n in range(7):
        body = {"bot": "Mythos", "messages": [message(f"m{n}", n, channel=f"c{n % 2 + 1}",
                                                      user=str(n % 2 + 1))]}  # fmt: skip
        assert client.post("/save", json=body, headers=headers).status_code == 202
    other = {"bot": "Other", "messages": [message("o1", 0)]}
    assert client.post("/save", json=other, headers=headers).status_code == 202
    for bot in ("Mythos", "Other"):
        answer = client.post(f"/agents/{bot}/flush", params={"wait": "true"}, headers=headers)
        assert answer.status_code == 200 and answer.json()["done"], answer.text


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


def open_page(driver: WebDriver, live: Live, view: str = "agents") -> None:
    driver.get(f"{live.url}/ui#{view}")
    wait_for(driver, lambda d: d.execute_script("return document.body.dataset.ready"))


def wait_for(driver: WebDriver, condition: Callable[[WebDriver], Any]) -> Any:
    return WebDriverWait(driver, WAIT_SECONDS).until(condition)

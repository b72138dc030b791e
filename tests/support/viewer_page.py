"""Driving the memory viewer in headless Chromium: the agents file and messages a page test seeds,
opening a view, waiting for it, and filling and submitting its forms."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.support.live_server import Live

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


def open_page(driver: WebDriver, live: Live, view: str = "agents") -> None:
    driver.get(f"{live.url}/ui#{view}")
    wait_for(driver, lambda d: d.execute_script("return document.body.dataset.ready"))


def wait_for(driver: WebDriver, condition: Callable[[WebDriver], Any]) -> Any:
    return WebDriverWait(driver, WAIT_SECONDS).until(condition)


def version(driver: WebDriver, selector: str) -> str:
    return driver.execute_script(
        "return document.querySelector(arguments[0]).dataset.version || '0'", selector
    )


def after(driver: WebDriver, selector: str, action: Callable[[], Any]) -> None:
    """Runs `action` and waits until the container at `selector` has rendered again."""
    before = version(driver, selector)
    action()
    wait_for(driver, lambda d: version(d, selector) != before)


def fill(driver: WebDriver, form: str, **values: str) -> None:
    for name, value in values.items():
        field = driver.find_element(By.CSS_SELECTOR, f"{form} [name={name}]")
        if field.tag_name == "select":
            Select(field).select_by_value(value)
            continue
        field.clear()
        if value:
            field.send_keys(value)


def submit(driver: WebDriver, form: str) -> None:
    driver.find_element(By.CSS_SELECTOR, f"{form} button[type=submit]").click()

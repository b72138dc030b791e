"""The viewer with API keys: asked once, kept in the tab's session only, scoped server-side."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from tests.support.live_server import Live
from tests.support.viewer_page import MYTHOS_KEY, OPS_KEY, open_page, seed, wait_for

OPS = {"Authorization": f"Bearer {OPS_KEY}"}
# A request the page's own script could be made to send: the other agent, with the scoped key.
CRAFTED = """
const [method, path, key, done] = arguments;
fetch(path, {method, headers: {Authorization: "Bearer " + key}})
  .then(async (r) => done([r.status, (await r.json()).error]));
"""


def test_a_scoped_key_sees_only_its_agent_and_cannot_act_on_others(
    live_with_keys: Live, browser: WebDriver, shot: Callable[[WebDriver, str], Path]
) -> None:
    live = live_with_keys
    seed(live, OPS)
    open_page(browser, live, "agents")
    form = browser.find_element(By.ID, "key-form")
    wait_for(browser, lambda d: form.is_displayed())  # no agent is visible without a key
    assert not Select(browser.find_element(By.ID, "agent")).options
    shot(browser, "key")
    browser.find_element(By.ID, "key-input").send_keys(MYTHOS_KEY)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(browser, lambda d: Select(d.find_element(By.ID, "agent")).options)
    names = [o.text for o in Select(browser.find_element(By.ID, "agent")).options]
    assert names == ["Mythos"]
    rows = browser.find_elements(By.CSS_SELECTOR, "#agents-table tbody tr")
    wait_for(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#agents-table td")) >= 7)
    assert [r.text.split()[0] for r in rows] == ["Mythos"]
    # the key lives in sessionStorage only: never in the page, a cookie or localStorage
    stored = browser.execute_script(
        "return [sessionStorage.getItem('memory-pool-key'), localStorage.length, document.cookie,"
        " document.documentElement.outerHTML.includes(arguments[0])]",
        MYTHOS_KEY,
    )
    assert stored == [MYTHOS_KEY, 0, "", False]
    assert OPS_KEY not in browser.page_source and MYTHOS_KEY not in browser.page_source

    other = live.stack.client.get("/agents/Other/memories", headers=OPS).json()["memories"][0]
    for method, path in (
        ("GET", "/agents/Other/memories"),
        ("GET", f"/agents/other/memories/{other['id']}"),
        ("DELETE", f"/agents/OTHER/memories/{other['id']}"),
        ("GET", "/agents/Other./timeline"),
        ("GET", "/dead-letters"),
        ("GET", "/agents/Mythos/memories"),
    ):
        status, error = browser.execute_async_script(CRAFTED, method, path, MYTHOS_KEY)
        assert (status, error) == ((200, None) if path.startswith("/agents/Mythos") else
                                   (403, "forbidden")), path  # fmt: skip
    assert live.stack.client.get(f"/agents/Other/memories/{other['id']}", headers=OPS).is_success
    # the page's own Prune form, pointed at the other agent's point, is refused by the server
    browser.get(f"{live.url}/ui#prune")
    wait_for(browser, lambda d: d.execute_script("return document.body.dataset.ready"))
    browser.find_element(By.CSS_SELECTOR, "#prune-form [name=value]").send_keys(other["id"])
    browser.find_element(By.CSS_SELECTOR, "#prune-form button[type=submit]").click()
    wait_for(browser, lambda d: "no point" in d.find_element(By.ID, "status").text)
    assert live.stack.client.get(f"/agents/Other/memories/{other['id']}", headers=OPS).is_success


def test_without_keys_the_page_works_with_no_key_asked(live: Live, browser: WebDriver) -> None:
    seed(live)
    open_page(browser, live, "agents")
    wait_for(browser, lambda d: Select(d.find_element(By.ID, "agent")).options)
    assert not browser.find_element(By.ID, "key-form").is_displayed()
    assert not browser.find_element(By.ID, "key-button").is_displayed()
    names = [o.text for o in Select(browser.find_element(By.ID, "agent")).options]
    assert names == ["Mythos", "Other"]


def test_the_page_is_served_with_a_strict_policy(live: Live) -> None:
    client = live.stack.client
    page = client.get("/ui")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert "unsafe-inline" not in policy and "<script>" not in page.text.replace(" ", "")
    for asset in ("viewer.js", "dom.js", "cards.js", "chart.js", "viewer.css"):
        assert client.get(f"/ui/{asset}").status_code == 200
    missing = client.get("/ui/secrets.txt")
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    scripts = ("viewer.js", "dom.js", "cards.js")
    assert "innerHTML" not in "".join(client.get(f"/ui/{a}").text for a in scripts)

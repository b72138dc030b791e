"""Defects a hostile review of the viewer found: each test failed on main (faf5386)."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select

from tests.support.browser import chromium
from tests.support.delete_data import st_point
from tests.support.embedding_server import EmbeddingServer
from tests.support.live_server import Live, live_memory_pool
from tests.support.viewer_page import (
    after,
    fill,
    message,
    open_page,
    seed,
    submit,
    version,
    wait_for,
)


def bar_titles(chart: WebElement) -> list[str]:
    return [
        t.get_property("textContent") for t in chart.find_elements(By.CSS_SELECTOR, "rect title")
    ]


def test_a_confirmed_delete_acts_on_the_agent_it_counted(live: Live, browser: WebDriver) -> None:
    """A count made for one agent, then the agent picker changed: the Delete button must not
    remove the other agent's points under the first one's confirmation."""
    seed(live)
    client = live.stack.client
    other_before = client.get("/agents/Other/memories").json()["memories"]
    assert other_before
    open_page(browser, live, "prune")
    fill(browser, "#prune-form", scope="source", value="discord")
    after(browser, "#prune-confirm", lambda: submit(browser, "#prune-form"))
    assert "from Mythos's memory" in browser.find_element(By.ID, "prune-count").text
    Select(browser.find_element(By.ID, "agent")).select_by_value("Other")
    wait_for(browser, lambda d: d.execute_script("return location.hash") == "#prune")
    time.sleep(0.3)  # the change handler's re-render
    go = browser.find_element(By.ID, "prune-go")
    shown = go.is_displayed()
    if shown:
        after(browser, "#prune-result", go.click)
    assert client.get("/agents/Other/memories").json()["memories"] == other_before
    assert not shown, "the confirmation of Mythos's count stayed open for Other"


def test_sources_named_like_object_members_keep_the_chart_whole(
    live: Live, browser: WebDriver
) -> None:
    """A source is any string a client sends; "constructor" or "__proto__" read through a plain
    object lookup are Object's members on the days without them (NaN bars, a NaN axis)."""
    client = live.stack.client
    now = int(time.time() * 1000)
    for n, source in enumerate(("constructor", "__proto__", "discord")):
        body = message(f"s{n}", 0, channel=f"c{n}") | {"ts": now}
        saved = client.post("/save", json={"bot": "Mythos", "source": source, "messages": [body]})
        assert saved.status_code == 202
    client.post("/agents/Mythos/flush", params={"wait": "true"})
    open_page(browser, live, "pipeline")
    wait_for(browser, lambda d: version(d, "#view-pipeline") != "0")
    chart = browser.find_element(By.CSS_SELECTOR, "#chart svg")
    markup = chart.get_attribute("outerHTML")
    assert "NaN" not in markup and "function" not in markup
    day = time.strftime("%Y-%m-%d", time.gmtime(now / 1000))
    titles = bar_titles(chart)
    wanted = [f"{day} {source}: 1" for source in ("__proto__", "constructor", "discord")]
    assert sorted(titles) == sorted(wanted)
    assert chart.find_element(By.CSS_SELECTOR, "text.axis").text == "3"


def test_long_source_names_do_not_overlap_in_the_legend(live: Live, browser: WebDriver) -> None:
    client = live.stack.client
    now = int(time.time() * 1000)
    sources = ["a-very-long-source-name-for-a-discord-bridge-" + str(n) for n in range(3)]
    for n, source in enumerate(sources):
        body = message(f"l{n}", 0, channel=f"c{n}") | {"ts": now}
        sent = {"bot": "Mythos", "source": source, "messages": [body]}
        assert client.post("/save", json=sent).status_code == 202
    client.post("/agents/Mythos/flush", params={"wait": "true"})
    open_page(browser, live, "pipeline")
    wait_for(browser, lambda d: version(d, "#view-pipeline") != "0")
    boxes = browser.execute_script(
        "return [...document.querySelectorAll('#chart text.legend')].map((t) => {"
        " const b = t.getBBox(); return [b.x, b.x + b.width]; })"
    )
    assert len(boxes) == 3
    for (_, end), (start, _) in itertools.pairwise(boxes):
        assert end < start, boxes
    names = browser.execute_script(
        "return [...document.querySelectorAll('#chart .legend-item > title')]"
        ".map((t) => t.textContent)"
    )
    assert names == sources  # whole in the tooltip


def test_a_source_spelled_like_the_extension_is_not_merged_with_its_points(
    live: Live, browser: WebDriver
) -> None:
    """A client may call its source "sillytavern (extension)": the chart keeps it apart from
    st-qdrant-memory's points (which have no source), not counted as them."""
    client = live.stack.client
    now = int(time.time() * 1000)
    body = message("e1", 0) | {"ts": now}
    sent = {"bot": "Mythos", "source": "sillytavern (extension)", "messages": [body]}
    assert client.post("/save", json=sent).status_code == 202
    client.post("/agents/Mythos/flush", params={"wait": "true"})
    points = [st_point("[today]\nAlex: hi", "x1,x2"), st_point("[today]\nAlex: bye", "x3")]
    for point in points:
        point.payload["timestamp"] = now
    live.stack.runtime.store.upsert("mem_mythos", points)
    open_page(browser, live, "pipeline")
    wait_for(browser, lambda d: version(d, "#view-pipeline") != "0")
    chart = browser.find_element(By.CSS_SELECTOR, "#chart svg")
    titles = bar_titles(chart)
    day = time.strftime("%Y-%m-%d", time.gmtime(now / 1000))
    counts = sorted(t.rsplit(": ", 1)[1] for t in titles if t.startswith(day))
    assert counts == ["1", "2"], titles  # the client's one chunk today, st's two points


def test_an_unknown_view_name_in_the_address_shows_the_agents(
    live: Live, browser: WebDriver
) -> None:
    """`#__proto__` (or `#constructor`) is "in" a plain object: the page hid every view."""
    seed(live)
    for name in ("__proto__", "constructor", "toString"):
        browser.get(f"{live.url}/ui#{name}")
        wait_for(browser, lambda d: d.execute_script("return document.body.dataset.ready"))
        assert browser.find_element(By.ID, "view-agents").is_displayed(), name
        assert browser.find_element(By.ID, "status").text == "", name


def test_a_long_agent_name_fits_a_phone_width_window(
    redis_url: str, embeddings: EmbeddingServer, tmp_path: Path
) -> None:
    long_name = "Professor Aldous Wetherby-Smythe, Keeper of the Northern Lighthouse Archive"
    agents = {"agents": [{"name": long_name}]}
    with (
        live_memory_pool(redis_url, embeddings.url, tmp_path, agents) as live,
        chromium(tmp_path / "profile", width=390, height=844) as driver,
    ):
        for view in ("agents", "browse"):
            open_page(driver, live, view)
            wait_for(driver, lambda d: Select(d.find_element(By.ID, "agent")).options)
            width = driver.execute_script(
                "return [document.documentElement.scrollWidth, innerWidth]"
            )
            assert width[0] <= width[1], (view, width)

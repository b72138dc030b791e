"""The memory viewer driven in a real headless Chromium against a live memory-pool."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.support.delete_data import st_point
from tests.support.embedding_server import EmbeddingServer
from tests.support.live_server import Live
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

Shot = Callable[[WebDriver, str], Path]


def card_ids(driver: WebDriver, container: str = "#browse-list") -> list[str]:
    cards = driver.find_elements(By.CSS_SELECTOR, f"{container} article.memory")
    return [card.get_attribute("data-id") or "" for card in cards]


def api_pages(live: Live, bot: str, **query: Any) -> list[list[str]]:
    found, cursor = [], None
    while True:
        params = {**query, **({"cursor": cursor} if cursor else {})}
        page = live.stack.client.get(f"/agents/{bot}/memories", params=params).json()
        found.append([m["id"] for m in page["memories"]])
        if (cursor := page["next_cursor"]) is None:
            return found


def test_agents_view_shows_each_agent_with_its_points(
    live: Live, browser: WebDriver, shot: Shot
) -> None:
    seed(live)
    live.stack.client.post("/save", json={"bot": "Mythos", "messages": [message("z1", 30)]})
    open_page(browser, live, "agents")
    wait_for(browser, lambda d: version(d, "#agents-table tbody") != "0")
    rows = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#agents-table tbody tr")]
    stats = live.stack.client.get("/agents/Mythos/stats").json()
    assert stats["buffered_messages"] == 2  # the open chunk m6 (written, kept to grow) and z1
    assert rows[0].startswith("Mythos mem_mythos 7 discord: 7 2 2")  # then the last write
    assert rows[0].endswith(" UTC no")  # writes are not held
    assert rows[1].startswith("Other mem_other 1 discord: 1 1 2")
    shot(browser, "agents")


def test_browse_with_filters_and_paging(live: Live, browser: WebDriver, shot: Shot) -> None:
    seed(live)
    open_page(browser, live, "browse")
    wait_for(browser, lambda d: card_ids(d))
    expected = api_pages(live, "Mythos", limit=3)
    assert len(expected) == 3
    fill(browser, "#browse-form", limit="3")
    after(browser, "#browse-list", lambda: submit(browser, "#browse-form"))
    seen = [card_ids(browser)]
    shot(browser, "browse")
    for _ in range(2):
        after(browser, "#browse-list", browser.find_element(By.ID, "browse-next").click)
        seen.append(card_ids(browser))
    assert seen == expected
    assert browser.find_element(By.ID, "browse-next").get_attribute("disabled") is not None
    after(browser, "#browse-list", browser.find_element(By.ID, "browse-prev").click)
    assert card_ids(browser) == expected[1]
    # filters: a channel and a person, then a date range
    fill(browser, "#browse-form", channel_id="c2", user_id="2", limit="20")
    after(browser, "#browse-list", lambda: submit(browser, "#browse-form"))
    assert card_ids(browser) == api_pages(live, "Mythos", channel_id="c2", user_id="2")[0]
    assert len(card_ids(browser)) == 3
    card = browser.find_element(By.CSS_SELECTOR, "#browse-list article.memory")
    assert "channel c2" in card.text and "point " + card_ids(browser)[0] in card.text
    fill(browser, "#browse-form", channel_id="", user_id="", since="06/10/2024", until="06/11/2024")
    after(browser, "#browse-list", lambda: submit(browser, "#browse-form"))
    since, until = 1_718_000_000_000 - 22_400_000, 1_718_150_400_000 - 1  # 2024-06-10..11 UTC
    assert card_ids(browser) == api_pages(live, "Mythos", since=since, until=until)[0]
    assert len(card_ids(browser)) == 6  # m0..m5 fall on those two days, m6 on the 12th


def test_search_shows_the_hits_and_block_of_retrieve(
    live: Live, browser: WebDriver, shot: Shot
) -> None:
    seed(live)
    body = {"bot": "Mythos", "query_text": "message m3 about the harbour", "limit": 3,
            "score_threshold": 0.1, "exclude_message_ids": ["m4"]}  # fmt: skip
    expected = live.stack.client.post("/retrieve", json=body).json()
    assert expected["hits"] and expected["formatted"]
    open_page(browser, live, "search")
    fill(browser, "#search-form", query_text=body["query_text"], limit="3",
         score_threshold="0.1", exclude="m4")  # fmt: skip
    after(browser, "#search-hits", lambda: submit(browser, "#search-form"))
    assert card_ids(browser, "#search-hits") == [hit["id"] for hit in expected["hits"]]
    scores = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#search-hits .score")]
    assert scores == [f"score {h['score'] * 100:.1f}% ({h['score']:.4f})" for h in expected["hits"]]
    block = browser.find_element(By.ID, "search-block").get_property("textContent")
    assert block == expected["formatted"]
    shot(browser, "search")


def test_a_delete_through_the_page_is_final(live: Live, browser: WebDriver, shot: Shot) -> None:
    seed(live)
    client = live.stack.client
    open_page(browser, live, "browse")
    wait_for(browser, lambda d: card_ids(d))
    doomed = card_ids(browser)[0]
    held = client.get(f"/agents/Mythos/memories/{doomed}").json()["message_ids"]
    button = browser.find_element(By.CSS_SELECTOR, f"article[data-id='{doomed}'] button.danger")
    after(browser, "#prune-confirm", button.click)
    assert browser.find_element(By.ID, "prune-count").text.startswith("This removes 1 point ")
    shot(browser, "prune")
    after(browser, "#prune-result", browser.find_element(By.ID, "prune-go").click)
    assert client.get(f"/agents/Mythos/memories/{doomed}").status_code == 404
    # a person's chunks through the form, with the count shown first
    person = api_pages(live, "Mythos", user_id="2")[0]
    fill(browser, "#prune-form", scope="user_id", value="2")
    after(browser, "#prune-confirm", lambda: submit(browser, "#prune-form"))
    assert browser.find_element(By.ID, "prune-go").text == f"Delete {len(person)} points"
    after(browser, "#prune-result", browser.find_element(By.ID, "prune-go").click)
    assert api_pages(live, "Mythos", user_id="2") == [[]]
    # re-sending every message stores nothing deleted
    resent = [message(f"m{n}", n, channel=f"c{n % 2 + 1}", user=str(n % 2 + 1)) for n in range(7)]
    answer = client.post("/save", json={"bot": "Mythos", "messages": resent}).json()
    assert answer["accepted"] == 0 and answer["duplicates"] == 7
    client.post("/agents/Mythos/flush", params={"wait": "true"})
    left = {i for m in live.stack.payloads("mem_mythos") for i in m["messageIdList"]}
    assert left == {"m0", "m2", "m4", "m6"} - set(held)


def test_chunk_text_renders_as_text(live: Live, browser: WebDriver, shot: Shot) -> None:
    nasty = (
        "<script>alert(1)</script> <img src=x onerror=alert(2)> **bold** [link](javascript:"
        "alert(3)) zero\u200bwidth\u202eevil"
    )
    client = live.stack.client
    body = {"bot": "Mythos", "messages": [message("x1", 0, text=nasty)]}
    assert client.post("/save", json=body).status_code == 202
    client.post("/agents/Mythos/flush", params={"wait": "true"})
    stored = client.get("/agents/Mythos/memories").json()["memories"][0]
    open_page(browser, live, "browse")
    wait_for(browser, lambda d: card_ids(d))
    text = browser.find_element(By.CSS_SELECTOR, "#browse-list pre.text")
    assert text.get_property("textContent") == stored["text"]
    assert "<script>alert(1)</script>" in stored["text"]
    assert text.get_property("childElementCount") == 0  # one text node: no markup made
    for tag in ("script", "img", "a", "b"):
        assert not browser.find_elements(By.CSS_SELECTOR, f"#browse-list {tag}"), tag
    try:
        browser.switch_to.alert.dismiss()
        raise AssertionError("an alert ran")
    except NoAlertPresentException:
        pass
    shot(browser, "injection")


def test_usable_at_phone_width(live: Live, browser: WebDriver, shot: Shot) -> None:
    seed(live)
    browser.set_window_size(390, 844)
    open_page(browser, live, "browse")
    wait_for(browser, lambda d: card_ids(d))
    width = browser.execute_script("return [document.documentElement.scrollWidth, innerWidth]")
    assert width[0] <= width[1], width  # nothing sideways off-screen
    shot(browser, "browse-phone")


def test_pipeline_shows_backlog_chart_and_dead_letters(
    live: Live, browser: WebDriver, shot: Shot, embeddings: EmbeddingServer
) -> None:
    seed(live)
    client = live.stack.client
    embeddings.reject_inputs_containing("POISON")
    now = int(time.time() * 1000)
    today = [message("p1", 0, text="a POISON message the provider refuses", channel="c7"),
             message("t1", 0, text="a message written today", channel="c8")]  # fmt: skip
    for body in today:
        body["ts"] = now
        assert client.post("/save", json={"bot": "Mythos", "messages": [body]}).status_code == 202
    client.post("/agents/Mythos/flush", params={"wait": "true"})
    assert client.get("/dead-letters").json()["total"] == 1
    open_page(browser, live, "pipeline")
    wait_for(browser, lambda d: version(d, "#view-pipeline") != "0")
    backlog = browser.find_element(By.ID, "backlog").text
    redis = client.get("/health").json()["redis"]
    assert f"Buffered messages\n{redis['buffered_messages']}" in backlog
    assert "Dead letters\n1" in backlog and "Queued flush tasks\n" in backlog
    bars = browser.find_elements(By.CSS_SELECTOR, "#chart svg rect title")
    day = time.strftime("%Y-%m-%d", time.gmtime(now / 1000))
    assert [b.get_property("textContent") for b in bars] == [f"{day} discord: 1"]
    # GET /quarantine arrives with the quarantine branch; the page works with it and without
    has_quarantine = client.get("/quarantine").status_code != 404
    shown = browser.find_element(By.ID, "quarantine").text
    assert shown == "None." if has_quarantine else "no quarantine endpoint" in shown
    letter = browser.find_element(By.CSS_SELECTOR, "#dead-letters article")
    assert "POISON" in letter.text and "Mythos" in letter.text
    shot(browser, "pipeline")
    embeddings.clear_faults()
    letter.find_element(By.TAG_NAME, "button").click()
    wait_for(browser, lambda d: "Queued 1 for replay" in d.find_element(By.ID, "status").text)
    deadline = time.monotonic() + 15
    while "p1" not in {i for m in live.stack.payloads("mem_mythos") for i in m["messageIdList"]}:
        assert time.monotonic() < deadline, "the replayed dead letter was not written"
        time.sleep(0.05)


def test_deleting_an_st_qdrant_memory_point_warns_it_may_come_back(
    live: Live, browser: WebDriver
) -> None:
    seed(live)
    st = st_point("[2024-06-20]\nAlex: written by the SillyTavern extension", "st-1,st-2")
    st.payload["timestamp"] = 1_719_000_000_000  # the newest chunk
    live.stack.runtime.store.upsert("mem_mythos", [st])
    open_page(browser, live, "browse")
    wait_for(browser, lambda d: card_ids(d))
    card = browser.find_element(By.CSS_SELECTOR, f"article[data-id='{st.id}']")
    assert card.find_element(By.CSS_SELECTOR, ".source").text == "sillytavern (extension)"
    note = browser.find_element(By.ID, "prune-st-note")
    after(browser, "#prune-confirm", card.find_element(By.CSS_SELECTOR, "button.danger").click)
    assert note.is_displayed() and "writing a deleted SillyTavern memory again" in note.text
    assert browser.find_element(By.ID, "prune-count").text.startswith(
        "This removes 1 point (2 messages)"
    )
    after(browser, "#prune-result", browser.find_element(By.ID, "prune-go").click)
    assert live.stack.client.get(f"/agents/Mythos/memories/{st.id}").status_code == 404

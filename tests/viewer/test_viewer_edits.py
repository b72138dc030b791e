"""Correcting a message's text in the memory viewer (#25), in a real headless Chromium against a
live memory-pool: the PATCH the page sends, the outcome it shows, the chunk it reads again."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement

from shared.store.interface import PointToWrite
from tests.support.delete_data import st_point
from tests.support.embedding_server import EMBEDDING_DIMS, embed_text
from tests.support.live_server import Live
from tests.support.viewer_page import (
    BASE_TS,
    MYTHOS_KEY,
    OPS_KEY,
    after,
    fill,
    open_page,
    seed,
    submit,
    wait_for,
)

Shot = Callable[[WebDriver, str], Path]
OPS = {"Authorization": f"Bearer {OPS_KEY}"}
SAVED = "saved — the chunk is rewritten in a few seconds"
EMPTIED = "too short to keep: the message left its chunk"
GONE = "This chunk is no longer stored under this point id"


def point_of(live: Live, message_id: str, headers: dict[str, str] | None = None) -> str:
    """The id of the point holding this message (each seeded message is its own chunk)."""
    page = live.stack.client.get("/agents/Mythos/memories", headers=headers).json()
    [found] = [m["id"] for m in page["memories"] if message_id in m["message_ids"]]
    return found


def card(driver: WebDriver, point_id: str) -> WebElement:
    return driver.find_element(By.CSS_SELECTOR, f"#browse-list article[data-id='{point_id}']")


def shown(driver: WebDriver, point_id: str, part: str) -> str:
    """The text of a part of a card, read in one step (a reload may replace the card at any
    time, which a found element would not survive)."""
    return driver.execute_script(
        "return document.querySelector(`#browse-list article[data-id='${arguments[0]}']"
        " ${arguments[1]}`).textContent",
        point_id,
        part,
    )


def status_of(driver: WebDriver, point_id: str) -> str:
    return shown(driver, point_id, ".edit-status")


def edit_through_page(driver: WebDriver, point_id: str, message_id: str, text: str) -> None:
    """Opens the card's messages, edits one and saves; returns once the page showed the outcome."""
    chunk = card(driver, point_id)
    if chunk.find_element(By.CSS_SELECTOR, "details.edit").get_attribute("open") is None:
        chunk.find_element(By.CSS_SELECTOR, "details.edit summary").click()
    row = chunk.find_element(By.CSS_SELECTOR, f"li.message[data-message-id='{message_id}']")
    row.find_element(By.CSS_SELECTOR, "button.edit").click()
    box = row.find_element(By.CSS_SELECTOR, "form.edit-form textarea")
    box.clear()
    box.send_keys(text)
    save = row.find_element(By.CSS_SELECTOR, "form.edit-form button[type=submit]")
    after(driver, "#browse-list", save.click)


def stored_text(live: Live, point_id: str, headers: dict[str, str] | None = None) -> str | None:
    answer = live.stack.client.get(f"/agents/Mythos/memories/{point_id}", headers=headers)
    return answer.json()["text"] if answer.status_code == 200 else None


def test_a_message_edited_in_the_page_is_rewritten_and_the_card_shows_it(
    live: Live, browser: WebDriver, shot: Shot
) -> None:
    seed(live)
    pid = point_of(live, "m3")
    open_page(browser, live, "browse")
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#browse-list article.memory"))
    row = card(browser, pid).find_element(By.CSS_SELECTOR, "li.message[data-message-id='m3']")
    assert row.get_property("textContent").startswith("user2 · 2024-06-11 ")
    new = "the keeper <b>repainted</b> the harbour lights & the lighthouse"
    edit_through_page(browser, pid, "m3", new)
    assert status_of(browser, pid) == SAVED
    # the worker rewrites the stored point; the page reads it again and shows the new text
    wait_for(browser, lambda _: new in (stored_text(live, pid) or ""))
    assert "message m3 about" not in (stored_text(live, pid) or "")
    wait_for(browser, lambda d: new in shown(d, pid, "pre.text"))
    assert shown(browser, pid, "li.message .said") == new
    assert status_of(browser, pid) == SAVED  # the outcome stays on the reloaded card
    assert not card(browser, pid).find_elements(By.TAG_NAME, "b")  # inserted as text
    browser.execute_script("arguments[0].scrollIntoView()", card(browser, pid))
    shot(browser, "edit")
    edit_through_page(browser, pid, "m3", new)
    assert status_of(browser, pid) == "unchanged: the message already had this text"

    # too short to keep: m4 leaves its chunk, which held nothing else and is deleted
    gone = point_of(live, "m4")
    edit_through_page(browser, gone, "m4", "ok")
    assert status_of(browser, gone).startswith(EMPTIED)  # the reload may have come already
    wait_for(browser, lambda d: GONE in status_of(d, gone))
    assert stored_text(live, gone) is None
    assert not card(browser, gone).find_elements(By.CSS_SELECTOR, "details.edit")


def test_a_refused_edit_shows_the_servers_reason_and_the_page_sends_the_key(
    live_with_keys: Live, browser: WebDriver
) -> None:
    live = live_with_keys
    seed(live, OPS)
    open_page(browser, live, "browse")
    form = browser.find_element(By.ID, "key-form")
    wait_for(browser, lambda d: form.is_displayed())
    browser.find_element(By.ID, "key-input").send_keys(MYTHOS_KEY)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#browse-list article.memory"))
    pid = point_of(live, "m2", OPS)
    # deleted elsewhere while the page shows it: the edit is refused (410, with the key: no 401)
    client = live.stack.client
    deleted = client.post("/agents/Mythos/delete", json={"message_id": "m2"}, headers=OPS)
    assert deleted.json()["deleted_points"] == 1
    edit_through_page(browser, pid, "m2", "a new text for a deleted message")
    assert status_of(browser, pid).startswith("message 'm2' was deleted; it stays deleted")
    assert "error" in (card(browser, pid).find_element(By.CSS_SELECTOR, ".edit-status")
                       .get_attribute("class") or "")  # fmt: skip
    wait_for(browser, lambda d: GONE in status_of(d, pid))  # reloaded: the chunk is gone
    assert not browser.find_element(By.ID, "key-form").is_displayed()


def old_point() -> PointToWrite:
    """A memory-pool point from before edits were kept: no chunkMessages."""
    text = "[2024-06-19]\nuser1: an old line, written before edits were kept"
    payload = {"text": text, "speakers": "user1", "messageCount": 1, "messageIds": "old-1",
               "timestamp": BASE_TS + 9 * 86_400_000, "isChunk": True, "source": "discord",
               "messageIdList": ["old-1"], "userIdList": ["1"], "channelId": "c1"}  # fmt: skip
    return PointToWrite(str(uuid.uuid4()), embed_text(text, EMBEDDING_DIMS), payload)


def test_chunks_without_their_messages_show_why_they_cannot_be_edited(
    live: Live, browser: WebDriver, shot: Shot
) -> None:
    seed(live)
    st = st_point("[2024-06-20]\nAlex: written by the SillyTavern extension", "st-1,st-2")
    st.payload["timestamp"] = BASE_TS + 10 * 86_400_000
    old = old_point()
    live.stack.runtime.store.upsert("mem_mythos", [st, old])
    open_page(browser, live, "browse")
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#browse-list article.memory"))
    for point, why in ((st.id, "written by sillytavern"), (old.id, "written before")):
        chunk = card(browser, point)
        assert not chunk.find_elements(By.CSS_SELECTOR, "details.edit, button.edit, textarea")
        hint = chunk.find_element(By.CSS_SELECTOR, ".no-edit")
        assert why in hint.text.lower() and why in (hint.get_attribute("title") or "").lower()
    shot(browser, "edit-none")
    editable = browser.find_elements(By.CSS_SELECTOR, "#browse-list details.edit")
    assert len(editable) == 7  # the seeded chunks
    # Search builds its cards from the raw payloads: the same controls
    open_page(browser, live, "search")
    fill(browser, "#search-form", query_text="message about the lighthouse keeper",
         limit="20", score_threshold="-1")  # fmt: skip
    after(browser, "#search-hits", lambda: submit(browser, "#search-form"))
    hits = browser.find_elements(By.CSS_SELECTOR, "#search-hits article.memory")
    kinds = {
        hit.get_attribute("data-id") or "": bool(hit.find_elements(By.CSS_SELECTOR, "details.edit"))
        for hit in hits
    }
    assert kinds.get(st.id) is False and kinds.get(old.id) is False
    assert sum(kinds.values()) >= 1

"""CORS in a real browser (headless Chromium): a page of SillyTavern's origin makes
st-qdrant-memory's own fetches (index.js 3.1.3: its headers, methods and bodies) to a
memory-pool on loopback and reads every answer, a refusal at the door included; the same
fetches from a page of another origin are blocked by the browser. Node, where the integration
test runs index.js, enforces no CORS at all."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from shared.agents import ApiKey
from tests.support.browser import chromium
from tests.support.door import MakeApp, agents, served
from tests.support.embedding_server import EMBEDDING_DIMS, embed_text
from tests.support.redis_server import free_port

KEY = "st-key-0123456789abcdef"

# st-qdrant-memory's calls as index.js makes them: getQdrantHeaders() (Content-Type, api-key)
# and the "local" provider's embedding call (Content-Type, Authorization: Bearer).
CALLS = """
const [base, key, vector, done] = arguments;
const qdrant = {"Content-Type": "application/json", "api-key": key};
const embed = {"Content-Type": "application/json", "Authorization": "Bearer " + key};
const c = base + "/qdrant/collections/mem_mythos";
const calls = [
  ["GET", base + "/qdrant/collections", qdrant],
  ["PUT", c, qdrant, {vectors: {size: vector.length, distance: "Cosine"}}],
  ["GET", c, qdrant],
  ["PUT", c + "/points", qdrant, {points: [{id: crypto.randomUUID(), vector,
    payload: {text: "Alex: the lighthouse", messageIds: "m1", isChunk: true}}]}],
  ["POST", c + "/points/search", qdrant, {vector, limit: 10, score_threshold: 0.3,
    with_payload: true}],
  ["POST", c + "/points/scroll", qdrant, {filter: {should: [{key: "messageIds",
    match: {text: "m1"}}]}, limit: 1, with_payload: false}],
  ["POST", base + "/v1/embeddings", embed, {model: "text-embedding-3-large",
    input: "the lighthouse"}],
  ["GET", c, {...qdrant, "api-key": "not-a-key-at-all-0000"}],
  ["DELETE", c, qdrant],
];
const seen = [];
for (const [method, url, headers, body] of calls) {
  try {
    const r = await fetch(url, {method, headers, body: body && JSON.stringify(body)});
    seen.push([method, r.status, Object.keys(await r.json())]);
  } catch (e) {
    seen.push([method, "blocked", e.name]);
  }
}
done(seen);
"""


class Page(BaseHTTPRequestHandler):
    """SillyTavern's page, as far as an origin goes."""

    def do_GET(self) -> None:
        body = b"<!doctype html><title>SillyTavern</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def page_origin() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    with chromium(tmp_path / "chromium-profile") as driver:
        driver.set_script_timeout(30)
        yield driver


def run_calls(browser: WebDriver, origin: str, base: str) -> list[list[Any]]:
    browser.get(origin + "/")
    vector = embed_text("the lighthouse", EMBEDDING_DIMS)
    seen: list[list[Any]] = browser.execute_async_script(CALLS, base, KEY, vector)
    return seen


def test_sillytaverns_page_reads_every_answer_and_another_page_none(
    make_app: MakeApp, browser: WebDriver, page_origin: str
) -> None:
    key = ApiKey(name="sillytavern", key=KEY, agents=("mythos",))
    app = make_app(agents(api_keys=[key]), MEMORY_POOL_CORS_ORIGINS=page_origin)
    with served(app) as (host, port):
        base = f"http://{host}:{port}"
        allowed = run_calls(browser, page_origin, base)
        # the same page by another name is another origin
        other = run_calls(browser, page_origin.replace("127.0.0.1", "localhost"), base)
    assert allowed == [
        ["GET", 200, ["result", "status", "time"]],
        ["PUT", 200, ["result", "status", "time"]],
        ["GET", 200, ["result", "status", "time"]],
        ["PUT", 200, ["result", "status", "time"]],
        ["POST", 200, ["result", "status", "time"]],
        ["POST", 200, ["result", "status", "time"]],
        ["POST", 200, ["object", "data", "model", "usage"]],
        ["GET", 401, ["status", "time"]],  # the door's refusal, readable by the page
        ["DELETE", 200, ["result", "status", "time"]],
    ]
    assert {status for _, status, _ in other} == {"blocked"}

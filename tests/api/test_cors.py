"""CORS: SillyTavern's page may call /v1/... and /qdrant/... from the allowed origins; no other
origin, and no other path, gets a CORS header."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from shared.agents import ApiKey
from tests.support.door import MakeApp, agents, client_for, served

SILLYTAVERN = "http://127.0.0.1:8000"
EMBED = {"model": "text-embedding-3-small", "input": "the harbour lights"}
KEY = "all-agents-key-0123456789"


def preflight(origin: str, method: str = "POST", **extra: str) -> dict[str, str]:
    """What a browser sends before st-qdrant-memory's fetch with a key and a JSON body."""
    return {
        "Origin": origin,
        "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": "authorization,content-type",
        **extra,
    }


def cors_headers(response: Any) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.lower().startswith("access-control-")}


@pytest.mark.parametrize("origin", [SILLYTAVERN, "http://localhost:8000"])
@pytest.mark.parametrize(
    ("path", "method"),
    [
        ("/v1/embeddings", "POST"),
        ("/qdrant/collections", "GET"),
        ("/qdrant/collections/mem_seraphina/points/search", "POST"),
        ("/qdrant/collections/mem_seraphina", "DELETE"),
    ],
)
def test_a_preflight_from_sillytavern_passes(
    client: TestClient, origin: str, path: str, method: str
) -> None:
    response = client.options(path, headers=preflight(origin, method))
    assert response.status_code == 204, response.text
    headers = cors_headers(response)
    assert headers["access-control-allow-origin"] == origin
    assert method in headers["access-control-allow-methods"].split(", ")
    allowed = {h.lower() for h in headers["access-control-allow-headers"].split(", ")}
    assert {"content-type", "authorization", "api-key"} <= allowed
    assert "access-control-allow-credentials" not in headers  # it sends no cookies
    assert "Origin" in response.headers["vary"]


def test_a_preflight_from_another_origin_gets_no_cors_header(client: TestClient) -> None:
    for origin in ("http://evil.example", "http://127.0.0.1:8001", "null"):
        response = client.options("/v1/embeddings", headers=preflight(origin))
        assert cors_headers(response) == {}, origin


def test_sillytavern_reads_the_answer_and_another_page_does_not(client: TestClient) -> None:
    mine = client.post("/v1/embeddings", json=EMBED, headers={"Origin": SILLYTAVERN})
    assert mine.status_code == 200
    assert mine.headers["access-control-allow-origin"] == SILLYTAVERN
    assert "Origin" in mine.headers["vary"]
    other = client.post("/v1/embeddings", json=EMBED, headers={"Origin": "http://evil.example"})
    assert cors_headers(other) == {}
    assert cors_headers(client.post("/v1/embeddings", json=EMBED)) == {}  # no page at all


def test_a_refusal_at_the_door_is_readable_by_the_page(make_app: MakeApp) -> None:
    with client_for(make_app(agents(api_keys=[ApiKey(name="ops", key=KEY)]))) as client:
        headers = {"Origin": SILLYTAVERN, "Authorization": "Bearer not-the-key-0123456789"}
        response = client.post("/v1/embeddings", json=EMBED, headers=headers)
        assert response.status_code == 401  # the page can show why
        assert response.headers["access-control-allow-origin"] == SILLYTAVERN
        good = {"Origin": SILLYTAVERN, "Authorization": f"Bearer {KEY}"}
        assert client.post("/v1/embeddings", json=EMBED, headers=good).status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/save", {"bot": "mythos", "messages": []}),
        ("POST", "/retrieve", {"bot": "mythos", "query_text": "lights"}),
        ("GET", "/health", None),
        ("GET", "/agents", None),
        ("GET", "/v1x", None),  # only /v1 and what is under it
    ],
)
def test_the_rest_of_the_api_stays_closed_to_pages(
    client: TestClient, method: str, path: str, body: dict[str, Any] | None
) -> None:
    answered = client.request(method, path, json=body, headers={"Origin": SILLYTAVERN})
    assert cors_headers(answered) == {}
    asked = client.options(path, headers=preflight(SILLYTAVERN, method))
    assert asked.status_code == 405 or path == "/v1x"
    assert cors_headers(asked) == {}


def test_the_origins_are_a_setting(make_app: MakeApp) -> None:
    lan = "http://192.168.1.20:8000"
    with client_for(make_app(MEMORY_POOL_CORS_ORIGINS=f" {lan}/ , https://st.example ")) as c:
        assert c.options("/v1/embeddings", headers=preflight(lan)).status_code == 204
        secure = c.options("/v1/embeddings", headers=preflight("https://st.example"))
        assert secure.headers["access-control-allow-origin"] == "https://st.example"
        assert cors_headers(c.options("/v1/embeddings", headers=preflight(SILLYTAVERN))) == {}


def test_an_origin_written_with_its_default_port_lets_the_page_in(make_app: MakeApp) -> None:
    """SillyTavern behind HTTPS on 443: the setting may name the port, the browser's Origin
    never does."""
    with client_for(make_app(MEMORY_POOL_CORS_ORIGINS="https://st.example.com:443")) as client:
        response = client.options("/v1/embeddings", headers=preflight("https://st.example.com"))
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == "https://st.example.com"


def test_a_page_of_the_lan_may_reach_loopback_when_allowed(make_app: MakeApp) -> None:
    """Chrome's Private Network Access asks before a LAN page calls a loopback server."""
    lan = "http://192.168.1.20:8000"
    with client_for(make_app(MEMORY_POOL_CORS_ORIGINS=lan)) as client:
        asks = preflight(lan, **{"Access-Control-Request-Private-Network": "true"})
        response = client.options("/v1/embeddings", headers=asks)
        assert response.headers["access-control-allow-private-network"] == "true"
        plain = client.options("/v1/embeddings", headers=preflight(lan))
        assert "access-control-allow-private-network" not in plain.headers


def test_a_loopback_server_lets_sillytavern_through_the_door(make_app: MakeApp) -> None:
    """As `memory-pool serve` binds it: the host check passes the page's requests."""
    with served(make_app()) as (host, port):
        url = f"http://{host}:{port}/v1/embeddings"
        asked = httpx.options(url, headers=preflight(SILLYTAVERN), timeout=10)
        answered = httpx.post(url, json=EMBED, headers={"Origin": SILLYTAVERN}, timeout=10)
        rebound = httpx.post(
            url, json=EMBED, headers={"Origin": "http://evil.example", "Host": "evil.example"}
        )
    assert asked.status_code == 204
    assert asked.headers["access-control-allow-origin"] == SILLYTAVERN
    assert answered.status_code == 200
    assert answered.headers["access-control-allow-origin"] == SILLYTAVERN
    assert rebound.status_code == 400 and cors_headers(rebound) == {}  # DNS rebinding


def test_an_unexpected_error_is_readable_by_the_page(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 500 the request-id middleware answers (a store that fails in a way no route expects)
    still carries the page's CORS header: without it SillyTavern sees a bare network error and
    cannot show the body's reason or the request id to quote."""
    runtime = client.app.state.runtime  # type: ignore[attr-defined]

    def broken() -> list[str]:
        raise RuntimeError("the store broke unexpectedly")

    monkeypatch.setattr(runtime.store, "collection_names", broken)
    response = client.get("/qdrant/collections", headers={"Origin": SILLYTAVERN})
    assert response.status_code == 500
    assert response.headers["access-control-allow-origin"] == SILLYTAVERN
    assert "x-request-id" in {k.lower() for k in response.headers}
    other = client.get("/qdrant/collections", headers={"Origin": "http://evil.example"})
    assert other.status_code == 500 and cors_headers(other) == {}

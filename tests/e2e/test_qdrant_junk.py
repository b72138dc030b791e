"""Review of /qdrant with junk a careless client may send (any Qdrant client may): payloads and
filters holding NaN, huge numbers, deep nesting, lone surrogates, odd keys. Each is refused in
Qdrant's error shape with nothing written, or stored so that what reads the pool later (recall,
the viewer, an export and its import) works on both stores."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from memory_pool.pool_commands import export_online
from shared.pool.format import read_record
from tests.e2e.test_qdrant_hostile import BOT, COLLECTION, create, point, upsert
from tests.support.door import (
    MakeApp,
    agents,
    app_factory,
    client_for,
    is_qdrant_error_shape,
    served,
)
from tests.support.embedding_server import EmbeddingServer
from tests.support.qdrant_server import QdrantTestServer
from tests.support.stores import KINDS

# What str.splitlines() and httpx's iter_lines() break a line at, and JSON keeps raw in a string
# (json.dumps with ensure_ascii=False): a chat's text may hold any of them.
LINE_BREAKS = "\u2028 \u2029 \x85"
NDJSON = {"content-type": "application/x-ndjson"}
JSON = {"content-type": "application/json"}


@pytest.fixture
def make(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[MakeApp]:
    with app_factory(redis_url, embeddings.url, tmp_path) as factory:
        yield factory


def overrides(kind: str, stack: ExitStack, folder: Path) -> dict[str, Any]:
    if kind == "edge":
        return {}
    return {"QDRANT_URL": stack.enter_context(QdrantTestServer(folder)).url}


@pytest.fixture(params=KINDS)
def client(request: pytest.FixtureRequest, make: MakeApp, tmp_path: Path) -> Iterator[TestClient]:
    """An app on each store, its collection made: Qdrant Edge, and a Qdrant server."""
    with ExitStack() as stack:
        app = make(agents(), **overrides(request.param, stack, tmp_path / "qdrant"))
        test_client = stack.enter_context(client_for(app))
        create(test_client)
        yield test_client


@pytest.mark.parametrize("kind", KINDS)
def test_line_breaks_in_a_payload_survive_an_export_and_its_import(
    make: MakeApp, tmp_path: Path, kind: str
) -> None:
    """A payload holding U+2028, U+2029 or U+0085 (in a value or a key) is exported as it is
    stored, and the export imports back, over HTTP and from `memory-pool export --url`'s file.
    The import route split the body with str.splitlines() and the CLI read the export with
    httpx's iter_lines(), both of which break lines there: the import refused a line "not JSON",
    and the CLI stopped on a piece of a point (BadExport). The export now writes them escaped,
    and both read lines at "\n" alone, so an earlier export holding them raw imports too."""
    sent = point(f"the harbour{LINE_BREAKS}at night", 7, **{f"key{LINE_BREAKS}": LINE_BREAKS})
    with ExitStack() as stack:
        app = make(agents(), **overrides(kind, stack, tmp_path / "qdrant"))
        host, port = stack.enter_context(served(app))
        url = f"http://{host}:{port}"
        with httpx.Client(base_url=url, timeout=30) as http:
            create(http)  # type: ignore[arg-type]
            put = http.put(f"{COLLECTION}/points?wait=true", json={"points": [sent]})
            assert put.status_code == 200, put.text
            exported = http.get(f"/agents/{BOT}/export", params={"timeout": 5})
            assert exported.status_code == 200, exported.text
        written = io.StringIO()
        export_online(url, None, BOT, written, vectors=True, force=False)
    # as an export of an earlier memory-pool holds them: raw
    raw = exported.text
    for char in LINE_BREAKS.replace(" ", ""):
        raw = raw.replace(f"\\u{ord(char):04x}", char)
    assert raw != exported.text
    for body in (exported.content, written.getvalue().encode(), raw.encode()):
        lines = body.decode().split("\n")
        [payload] = [read_record(line, n).payload for n, line in enumerate(lines, 1)
                     if line.startswith('{"id":')]  # type: ignore[union-attr]  # fmt: skip
        assert payload == sent["payload"]
        with client_for(make(agents())) as target:
            loaded = target.post(f"/agents/{BOT}/import", content=body, headers=NDJSON)
            assert loaded.status_code == 200, loaded.text
            scroll = target.post(f"{COLLECTION}/points/scroll", json={"with_payload": True})
            [stored] = scroll.json()["result"]["points"]
            assert stored == {"id": 7, "payload": sent["payload"]}


# Keys Qdrant's JSON paths cannot name (both stores refuse a filter on them), and a lone
# surrogate, which no store's filter can carry.
UNFILTERABLE_KEYS = ["a b", "$", 'a"b', "a\x00b", "\ufffd"]


@pytest.mark.parametrize("key", UNFILTERABLE_KEYS)
def test_a_search_on_a_key_no_store_filters_on_is_refused_for_what_it_is(
    client: TestClient, key: str
) -> None:
    """A filter a store refuses is a 400 in Qdrant's shape on both stores; a Qdrant server's
    refusal of a search's filter was reported as the collection refusing the query vector,
    "made with another embedding model", which it was not (the vector had the right size)."""
    upsert(client, point("the harbour at night", 1, **{key: "v"}))
    search = {"vector": point("the harbour")["vector"], "limit": 3,
              "filter": {"must": [{"key": key, "match": {"value": "v"}}]}}  # fmt: skip
    for call, body in [("search", search), ("scroll", {"filter": search["filter"]})]:
        response = client.post(f"{COLLECTION}/points/{call}", json=body)
        assert response.status_code == 400, response.text
        assert is_qdrant_error_shape(response.json())
        assert "embedding model" not in response.text, response.text


SURROGATE_FILTERS = {
    "value": {"key": "x", "match": {"value": "a\ud800"}},
    "any": {"key": "x", "match": {"any": ["b", "\udfff"]}},
    "text": {"key": "messageIds", "match": {"text": "m\ud800"}},
    "key": {"key": "x\ud800", "match": {"value": "a"}},
    "range-key": {"key": "\udfff", "range": {"gt": 1}},
    "is_empty": {"is_empty": {"key": "\udfff"}},
    "is_null": {"is_null": {"key": "\udfff"}},
    "has_vector": {"has_vector": "\ud800"},
}


@pytest.mark.parametrize("condition", list(SURROGATE_FILTERS))
def test_a_lone_surrogate_in_a_filter_is_refused_alike_everywhere(
    client: TestClient, condition: str
) -> None:
    """A lone surrogate (`\\ud800`, which Qdrant's JSON reader refuses) anywhere in a filter is
    one 400 from search, scroll and count on both stores. It reached the engines, which refused
    it each in its words (a serializer's UnicodeEncodeError, a Rust type's extraction), or not
    at all: an `is_null` on such a key was 200 from scroll and 400 from count, a `text` match
    200 (no point can hold one: /qdrant refuses them in payloads)."""
    upsert(client, point("the harbour", 1, x="a", messageIds="m1"))
    flt = {"must": [SURROGATE_FILTERS[condition]]}
    calls = [("search", {"vector": point("x")["vector"], "limit": 3}), ("scroll", {}),
             ("count", {})]  # fmt: skip
    for call, extra in calls:
        body = json.dumps({"filter": flt, **extra}).encode()  # the surrogate as an escape
        response = client.post(f"{COLLECTION}/points/{call}", content=body, headers=JSON)
        assert response.status_code == 400, (call, response.text)
        assert is_qdrant_error_shape(response.json())
        assert "lone surrogate" in response.json()["status"]["error"], (call, response.text)

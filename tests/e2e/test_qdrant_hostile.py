"""Review of #26 as a careless or hostile SillyTavern user: points written through /qdrant with
payloads st-qdrant-memory would never send (but any Qdrant client may) must not break what the
rest of memory-pool does with the same collection: deletes, the viewer, stats, export/import;
and the door refuses a wrong `api-key` as it refuses any other wrong key."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from shared.agents import Agents, ApiKey
from tests.support.door import MakeApp, agents, app_factory, client_for, is_qdrant_error_shape
from tests.support.embedding_server import EMBEDDING_DIMS, EmbeddingServer, embed_text
from tests.support.qdrant_server import QdrantTestServer
from tests.support.stores import KINDS

BOT = "mythos"
COLLECTION = f"/qdrant/collections/mem_{BOT}"
BASE_TS = 1_718_000_000_000
# Beyond the years 1970-9999 every reader's date code can show (shared/format/timestamps.py),
# yet an unsigned 64-bit integer Qdrant stores as sent.
YEAR_300_MILLION_MS = 10**19


@pytest.fixture
def make(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[MakeApp]:
    with app_factory(redis_url, embeddings.url, tmp_path) as factory:
        yield factory


@pytest.fixture(params=KINDS)
def client(request: pytest.FixtureRequest, make: MakeApp, tmp_path: Path) -> Iterator[TestClient]:
    """An app on each store: Qdrant Edge, and a Qdrant server (QDRANT_URL)."""
    with ExitStack() as stack:
        overrides: dict[str, Any] = {}
        if request.param == "server":
            server = stack.enter_context(QdrantTestServer(tmp_path / "qdrant"))
            overrides["QDRANT_URL"] = server.url
        test_client = stack.enter_context(client_for(make(agents(), **overrides)))
        create(test_client)
        yield test_client


def create(client: TestClient) -> None:
    body = {"vectors": {"size": EMBEDDING_DIMS, "distance": "Cosine"}}
    response = client.put(COLLECTION, json=body)
    assert response.status_code == 200, response.text


def point(text: str, point_id: int | str | None = None, **payload: Any) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()) if point_id is None else point_id,
        "vector": embed_text(text, EMBEDDING_DIMS),
        "payload": {"text": text, **payload},
    }


def upsert(client: TestClient, *points: dict[str, Any]) -> None:
    response = client.put(f"{COLLECTION}/points?wait=true", json={"points": list(points)})
    assert response.status_code == 200, response.text


def no_server_error(response: Any) -> Any:
    assert response.status_code < 500, response.text[:500]
    return response


def test_a_delete_by_message_id_survives_chunk_messages_of_impossible_times(
    client: TestClient,
) -> None:
    """A /qdrant point may carry a `chunkMessages` list (memory-pool's own field) whose times
    no date can show: a delete of one of its messages must not 500 while rebuilding the chunk
    from them (utc_date of year 300 million); the chunk cannot be rebuilt, so it goes whole."""
    records = [
        {"id": "m1", "speaker": "Alex", "ts": YEAR_300_MILLION_MS, "text": "the lighthouse"},
        {"id": "m2", "speaker": "Mythos", "ts": YEAR_300_MILLION_MS, "text": "in the fog"},
    ]
    upsert(client, point("Alex: the lighthouse", messageIds="m1,m2", chunkMessages=records))
    preview = no_server_error(client.post(f"/agents/{BOT}/delete/preview",
                                          json={"message_id": "m1"}))  # fmt: skip
    assert preview.status_code == 200, preview.text
    deleted = no_server_error(client.post(f"/agents/{BOT}/delete", json={"message_id": "m1"}))
    assert deleted.status_code == 200, deleted.text
    left = client.post(f"{COLLECTION}/points/count", json={}).json()["result"]["count"]
    assert left == 0


def test_a_delete_by_user_survives_chunk_messages_of_impossible_times(client: TestClient) -> None:
    """The same through a user's delete: a point listing the user in `userIdList` with
    unreadable message times is removed, not a 500."""
    records = [
        {"id": "m1", "speaker": "Alex", "ts": -(10**18), "text": "a", "userId": "u1"},
        {"id": "m2", "speaker": "Sam", "ts": 1e300, "text": "b", "userId": "u2"},
    ]
    upsert(client, point("Alex: a", source="discord", messageIdList=["m1", "m2"],
                         userIdList=["u1", "u2"], chunkMessages=records))  # fmt: skip
    deleted = no_server_error(client.post(f"/agents/{BOT}/delete", json={"user_id": "u1"}))
    assert deleted.status_code == 200, deleted.text


def test_the_viewer_pages_past_points_with_nanosecond_timestamps(client: TestClient) -> None:
    """A client that writes `timestamp` in nanoseconds (19 digits) stores it as any integer;
    the viewer's `next_cursor` for such a page must be one the viewer takes back (it refused
    its own cursor: 400 "not one this API gave out"), so the next page can be read."""
    nanos = BASE_TS * 1_000_000
    upsert(client, *[point(f"note {n}", timestamp=nanos + n) for n in range(3)])
    first = client.get(f"/agents/{BOT}/memories", params={"limit": 1})
    assert first.status_code == 200, first.text
    cursor = first.json()["next_cursor"]
    assert cursor is not None
    second = client.get(f"/agents/{BOT}/memories", params={"limit": 1, "cursor": cursor})
    assert second.status_code == 200, second.text
    assert len(second.json()["memories"]) == 1


def test_stats_never_count_a_negative_number_of_st_points(client: TestClient) -> None:
    """A payload's `source` may be a list (Qdrant keeps it; its facet counts the point once
    per value): `points_without_source` must stay between 0 and `points`."""
    upsert(client, point("one point, three sources", source=["discord", "matrix", "irc"]))
    stats = client.get(f"/agents/{BOT}/stats")
    assert stats.status_code == 200, stats.text
    body = stats.json()
    assert body["points"] == 1
    assert 0 <= body["points_without_source"] <= body["points"], body


def test_an_export_with_integer_point_ids_imports_back(make: MakeApp) -> None:
    """Qdrant and /qdrant take unsigned integer ids; the export writes them as they are, so
    its import must take them too (it refused the whole export: "is not a UUID"), or a pool
    with one such point could never be restored or moved."""
    with client_for(make(agents())) as source:
        create(source)
        upsert(source, point("numbered", 7), point("named"))
        export = source.get(f"/agents/{BOT}/export", params={"timeout": 5})
        assert export.status_code == 200, export.text
        lines = export.text.splitlines()
        assert any(json.loads(line).get("id") == "7" for line in lines)
    with client_for(make(agents())) as target:
        loaded = target.post(
            f"/agents/{BOT}/import",
            content="\n".join(lines).encode(),
            headers={"content-type": "application/x-ndjson"},
        )
        assert loaded.status_code == 200, loaded.text
        assert loaded.json()["points"] == 2
        scroll = target.post(f"{COLLECTION}/points/scroll", json={"limit": 10}).json()
        assert 7 in {p["id"] for p in scroll["result"]["points"]}


def keyed_app(make: MakeApp) -> FastAPI:
    key = ApiKey(name="sillytavern", key="st-key-0123456789abcdef", agents=(BOT,))
    return make(agents(api_keys=[key]))


def test_a_wrong_api_key_is_refused_at_the_door_before_the_body(make: MakeApp) -> None:
    """st-qdrant-memory's key travels in `api-key`: a wrong one is 401 in Qdrant's shape
    before the body is read, as a wrong X-API-Key is (it was parsed first: a body of the
    wrong shape answered 400, telling an unauthenticated caller about the body instead)."""
    with client_for(keyed_app(make)) as client:
        wrong = {"api-key": "not-a-key-at-all-0000", "content-type": "application/json"}
        for body in (b"{not json", json.dumps({"points": [{"id": -1}]}).encode()):
            response = client.put(f"{COLLECTION}/points", content=body, headers=wrong)
            assert response.status_code == 401, response.text
            assert is_qdrant_error_shape(response.json()), response.text


# Larger than float32's largest (3.4e38): finite for JSON and Python, infinite once an engine
# stores it as float32, and a cosine of an infinite vector is NaN.
BEYOND_FLOAT32 = 1e39


@pytest.mark.parametrize("loudness", [BEYOND_FLOAT32, -BEYOND_FLOAT32])
def test_vectors_beyond_float32_are_refused_or_harmless(
    client: TestClient, loudness: float
) -> None:
    """A vector of finite numbers too big for float32 must be refused (400/422) or stored so
    that no search and no recall answers 500 (a NaN score is no JSON, nor a percentage)."""
    upsert(client, point("the lighthouse keeper waters the garden"))
    loud = point("Bartholomew rowed to the lighthouse")
    loud["vector"] = [loudness] * EMBEDDING_DIMS
    put = no_server_error(client.put(f"{COLLECTION}/points?wait=true", json={"points": [loud]}))
    search = {"vector": embed_text("the lighthouse", EMBEDDING_DIMS), "limit": 5,
              "with_payload": True}  # fmt: skip
    no_server_error(client.post(f"{COLLECTION}/points/search", json=search))
    for recall in ("hybrid", "dense"):
        body = {"bot": BOT, "query_text": "Bartholomew lighthouse", "score_threshold": -1,
                "lexical_threshold": 0.01, "recall": recall}  # fmt: skip
        no_server_error(client.post("/retrieve", json=body))
    loud_query = {**search, "vector": [loudness] * EMBEDDING_DIMS}
    no_server_error(client.post(f"{COLLECTION}/points/search", json=loud_query))
    if put.status_code != 200:
        assert is_qdrant_error_shape(put.json()), put.text


def test_a_character_only_sillytavern_writes_is_in_the_viewers_agent_list(make: MakeApp) -> None:
    """The one-command pool (no agents file: any agent accepted): SillyTavern creates and
    fills `mem_seraphina` through /qdrant; the viewer's agent list (GET /agents) must show that
    agent, as it shows every agent that stored something, or its memories cannot be browsed
    from the viewer (it listed only agents that wrote through /save)."""
    with client_for(make(Agents([], accept_unlisted=True))) as client:
        collection = "/qdrant/collections/mem_seraphina"
        body = {"vectors": {"size": EMBEDDING_DIMS, "distance": "Cosine"}}
        assert client.put(collection, json=body).status_code == 200
        points = {"points": [point("Alex: the lighthouse", messageIds="st-1")]}
        assert client.put(f"{collection}/points?wait=true", json=points).status_code == 200
        listed = client.get("/agents")
        assert listed.status_code == 200, listed.text
        assert "mem_seraphina" in {a["collection"] for a in listed.json()["agents"]}, listed.text


def test_an_upsert_into_a_collection_of_another_model_is_refused(make: MakeApp) -> None:
    """memory-pool never puts a vector of another model into a collection (its flushes are
    held, /health says why): /qdrant must not either, or the collection mixes two models'
    vectors of one size that its recall cannot tell apart. Refused, nothing written."""
    app = make(agents())
    with client_for(app) as client:
        store = app.state.runtime.store
        store.ensure_collection(f"mem_{BOT}", size=EMBEDDING_DIMS, model="an-older-model")
        put = client.put(f"{COLLECTION}/points?wait=true", json={"points": [point("hello")]})
        assert 400 <= put.status_code < 500, put.text
        assert is_qdrant_error_shape(put.json()), put.text
        assert store.count(f"mem_{BOT}") == 0


JUNK_PAYLOADS: list[dict[str, Any]] = [
    {},  # no text at all
    {"text": 42, "speakers": ["a", "b"], "messageIds": 7, "timestamp": "yesterday"},
    {"text": {"nested": [1, {"deeper": None}]}, "source": {"a": 1}, "timestamp": -5},
    {"text": None, "messageIdList": "m1", "userIdList": "u1", "timestamp": 1.5e12},
    {"text": "x", "chunkMessages": "not a list", "isChunk": "yes", "timestamp": True},
    {"text": "y", "chunkMessages": [1, "a", None, {"id": "m1"}], "messageIds": "m1"},
    {"text": "z", "chunkMessages": [{"id": {"a": 1}, "ts": "soon", "text": 1, "speaker": 2}]},
    {"text": "w", "source": "", "channelId": 5, "conversationId": ["c"], "guildId": {}},
    {"text": "v", "source": None, "messageIdList": [1, None, {"x": 1}], "timestamp": 2**63 - 1},
    {"text": "u" * 5000, "speakers": None, "messageIds": ",,,m1,,", "timestamp": -(2**63)},
]


def test_junk_payloads_break_no_reader_of_the_collection(client: TestClient) -> None:
    """Payloads no writer of memory-pool's makes (missing or non-string text, fields of the
    wrong type, nested junk, extreme timestamps), written through /qdrant: recall, the
    viewer's reads, stats, timeline, export, known ids, edits and deletes answer without 5xx."""
    sent = [{**point("junk"), "payload": payload} for payload in JUNK_PAYLOADS]
    upsert(client, *sent)
    scroll = client.post(f"{COLLECTION}/points/scroll", json={"limit": 100}).json()
    ids = [p["id"] for p in scroll["result"]["points"]]
    assert len(ids) == len(JUNK_PAYLOADS)
    for recall in ("hybrid", "dense"):
        body = {"bot": BOT, "query_text": "junk", "score_threshold": -1, "recall": recall,
                "lexical_threshold": 0.01, "exclude_message_ids": ["m1"]}  # fmt: skip
        assert no_server_error(client.post("/retrieve", json=body)).status_code == 200
    cursor, pages = None, 0
    while pages < 20:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = no_server_error(client.get(f"/agents/{BOT}/memories", params=params))
        assert page.status_code == 200, page.text
        cursor, pages = page.json()["next_cursor"], pages + 1
        if cursor is None:
            break
    for pid in ids:
        assert no_server_error(client.get(f"/agents/{BOT}/memories/{pid}")).status_code == 200
    for path in ("stats", "timeline", "export?timeout=5"):
        assert no_server_error(client.get(f"/agents/{BOT}/{path}")).status_code == 200
    known = {"message_ids": ["m1", "u1"], "source": "discord"}
    no_server_error(client.post(f"/agents/{BOT}/known-ids", json=known))
    no_server_error(client.patch(f"/agents/{BOT}/messages/m1", json={"text": "new text here"}))
    for scope in ({"message_id": "m1"}, {"user_id": "u1"}, {"source": "discord"}):
        no_server_error(client.post(f"/agents/{BOT}/delete/preview", json=scope))
        no_server_error(client.post(f"/agents/{BOT}/delete", json=scope))
    for pid in ids[:3]:
        no_server_error(client.delete(f"/agents/{BOT}/memories/{pid}"))
    assert no_server_error(client.delete(COLLECTION)).status_code == 200


OTHER_SPELLINGS = [
    "mem_polaris", "mem_Polaris", "mem_POLARIS", "mem_polaris.", "mem_polaris_", "mem__polaris",
    "MEM_polaris", "mem_ｐolaris", "mem_polarİs", "mem_polaris%2F..%2Fmem_mythos",
    "mem_mythos%2F..%2Fmem_polaris", "%2E%2E%2Fmem_polaris", "mem_polaris%00", "mem_polaris%20",
    "mem_mythos%2Fpoints", "mem_polari%C5%BF",
]  # fmt: skip


def test_a_scoped_key_reaches_no_other_spelling_of_another_agent(make: MakeApp) -> None:
    """A key scoped to mythos, on a pool where polaris has a collection: every spelling of
    polaris's (case, unicode look-alikes, dots, url-encoded slashes and NULs) is refused in
    Qdrant's shape, creates nothing and reads nothing."""
    with client_for(keyed_app(make)) as client:
        store = client.app.state.runtime.store  # type: ignore[attr-defined]
        store.ensure_collection("mem_polaris", size=EMBEDDING_DIMS, model="m")
        before = sorted(store.collection_names())
        mine = {"api-key": "st-key-0123456789abcdef"}
        create_body = {"vectors": {"size": EMBEDDING_DIMS, "distance": "Cosine"}}
        for name in OTHER_SPELLINGS:
            path = f"/qdrant/collections/{name}"
            for method, suffix, body in [
                ("GET", "", None), ("PUT", "", create_body), ("DELETE", "", None),
                ("PUT", "/points", {"points": [point("x")]}),
                ("POST", "/points/scroll", {}), ("POST", "/points/count", {}),
            ]:  # fmt: skip
                response = client.request(method, path + suffix, json=body, headers=mine)
                assert response.status_code in (400, 403, 404, 422), (name, method, response.text)
                assert is_qdrant_error_shape(response.json()), response.text
        assert sorted(store.collection_names()) == before
        listed = client.get("/qdrant/collections", headers=mine).json()["result"]
        assert listed == {"collections": []}


@pytest.mark.parametrize(
    ("origin", "path"),
    [("http://127.0.0.1:8000.evil.com", "/qdrant/collections"),
     ("http://127.0.0.1:80001", "/v1/embeddings"), ("null", "/qdrant/collections"),
     ("http://evil.com", "/qdrant/collections"), ("http://127.0.0.1:8000", "/qdrantx"),
     ("http://127.0.0.1:8000", "/v1x/embeddings"), ("http://127.0.0.1:8000", "/agents"),
     ("http://127.0.0.1:8000", "/agents/mythos/stats"), ("http://127.0.0.1:8000", "/ui"),
     ("http://127.0.0.1:8000", "/health"), ("https://127.0.0.1:8000", "/qdrant/collections")],
)  # fmt: skip
def test_cors_gives_nothing_to_other_origins_or_paths(
    make: MakeApp, origin: str, path: str
) -> None:
    """Neither a preflight nor an answer carries a CORS header for another origin (a look-alike
    host, port or scheme, "null") or for a path outside /v1 and /qdrant."""
    with client_for(make(agents())) as client:
        preflight = client.options(
            path, headers={"Origin": origin, "Access-Control-Request-Method": "GET"}
        )
        answer = client.get(path, headers={"Origin": origin})
        for response in (preflight, answer):
            assert response.status_code < 500, response.text[:300]
            cors = [h for h in response.headers if h.lower().startswith("access-control-")]
            assert cors == [], (path, origin, dict(response.headers))


def test_point_ids_of_every_kind_are_taken_or_refused_whole(client: TestClient) -> None:
    """Unsigned integers to 2**64-1 and UUIDs in any form uuid reads are stored (UUIDs in
    canonical form) and reach the viewer's point reads and deletes; anything else refuses the
    whole upsert in Qdrant's shape and writes nothing."""
    named = uuid.uuid4()
    taken: list[int | str] = [0, 2**64 - 1, f"{{{named}}}", f"urn:uuid:{uuid.uuid4()}",
                              str(uuid.uuid4()).upper(), uuid.uuid4().hex]  # fmt: skip
    upsert(client, *[point(f"id kind {n}", pid) for n, pid in enumerate(taken)])
    scroll = client.post(f"{COLLECTION}/points/scroll", json={"limit": 100}).json()["result"]
    ids = {p["id"] for p in scroll["points"]}
    assert len(ids) == len(taken) and {0, 2**64 - 1, str(named)} <= ids
    for refused in [-1, 2**64, "5", 1.5, True, "", "not-a-uuid", None, [1], {"a": 1}]:
        body = {"points": [point("good"), {**point("bad"), "id": refused}]}
        response = client.put(f"{COLLECTION}/points", json=body)
        assert response.status_code in (400, 422), (refused, response.text)
        assert is_qdrant_error_shape(response.json())
    count = client.post(f"{COLLECTION}/points/count", json={}).json()["result"]["count"]
    assert count == len(taken)
    for pid in ids:
        read = client.get(f"/agents/{BOT}/memories/{pid}")
        assert read.status_code == 200, read.text
    gone = client.delete(f"/agents/{BOT}/memories/{2**64 - 1}")
    assert gone.status_code == 200, gone.text
    has = {"filter": {"must": [{"has_id": [2**64 - 1, 0]}]}}
    left = client.post(f"{COLLECTION}/points/count", json=has).json()["result"]["count"]
    assert left == 1


def nested(depth: int) -> dict[str, Any]:
    flt: dict[str, Any] = {"must": [{"key": "text", "match": {"value": "x"}}]}
    for _ in range(depth):
        flt = {"should": [flt, {"is_null": {"key": "a"}}]}
    return flt


def test_huge_asks_are_bounded_in_qdrants_shape(client: TestClient) -> None:
    """Limits and offsets beyond the bounds, filters too deep, too many conditions or values:
    a 4xx in Qdrant's shape; within the bounds, an answer."""
    vector = embed_text("x", EMBEDDING_DIMS)
    upsert(client, point("x"))
    search = f"{COLLECTION}/points/search"
    scroll = f"{COLLECTION}/points/scroll"
    count = f"{COLLECTION}/points/count"
    many = [{"key": "text", "match": {"value": str(n)}} for n in range(1025)]
    refused = [
        (search, {"vector": vector, "limit": 10**9}),
        (search, {"vector": vector, "limit": 5, "offset": -1}),
        (search, {"vector": vector, "limit": 5, "offset": 10**12}),
        (scroll, {"limit": 10**9}),
        (scroll, {"limit": -5}),
        (scroll, {"offset": -5}),
        (count, {"filter": nested(40)}),
        (count, {"filter": {"should": many}}),
        (count, {"filter": {"must": [{"key": "t", "match": {"any": list(range(10_001))}}]}}),
        (count, {"filter": {"must": [{"has_id": list(range(10_001))}]}}),
        (count, {"filter": {"must": [{"key": "t", "range": {"gt": 10**30}}]}}),
    ]
    for path, body in refused:
        response = client.post(path, json=body)
        assert 400 <= response.status_code < 500, (body if len(str(body)) < 200 else path,
                                                   response.text[:300])  # fmt: skip
        assert is_qdrant_error_shape(response.json())
    answered = [
        (search, {"vector": vector, "limit": 10_000, "offset": 100_000}),
        (scroll, {"limit": 10_000}),
        (count, {"filter": nested(7)}),
    ]
    for path, body in answered:
        response = client.post(path, json=body)
        assert response.status_code == 200, response.text[:300]

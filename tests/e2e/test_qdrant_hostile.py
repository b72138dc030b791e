"""Review of #26 as a careless or hostile SillyTavern user: points written through /qdrant with
payloads st-qdrant-memory would never send (but any Qdrant client may) must not break what the
rest of memory-pool does with the same collection: deletes, the viewer, stats, export/import;
and the door refuses a wrong `api-key` as it refuses any other wrong key."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from shared.agents import Agents, ApiKey
from tests.support.door import MakeApp, agents, app_factory, client_for, is_qdrant_error_shape
from tests.support.embedding_server import EMBEDDING_DIMS, EmbeddingServer, embed_text

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


@pytest.fixture
def client(make: MakeApp) -> Iterator[TestClient]:
    with client_for(make(agents())) as test_client:
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


def test_vectors_beyond_float32_are_refused_or_harmless(client: TestClient) -> None:
    """A vector of finite numbers too big for float32 must be refused (400/422) or stored so
    that no search and no recall answers 500 (a NaN score is no JSON, nor a percentage)."""
    upsert(client, point("the lighthouse keeper waters the garden"))
    loud = point("Bartholomew rowed to the lighthouse")
    loud["vector"] = [BEYOND_FLOAT32] * EMBEDDING_DIMS
    put = no_server_error(client.put(f"{COLLECTION}/points?wait=true", json={"points": [loud]}))
    search = {"vector": embed_text("the lighthouse", EMBEDDING_DIMS), "limit": 5,
              "with_payload": True}  # fmt: skip
    no_server_error(client.post(f"{COLLECTION}/points/search", json=search))
    for recall in ("hybrid", "dense"):
        body = {"bot": BOT, "query_text": "Bartholomew lighthouse", "score_threshold": -1,
                "lexical_threshold": 0.01, "recall": recall}  # fmt: skip
        no_server_error(client.post("/retrieve", json=body))
    loud_query = {**search, "vector": [BEYOND_FLOAT32] * EMBEDDING_DIMS}
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

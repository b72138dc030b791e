"""Property-based: no payload and no filter breaks /qdrant. Points with any JSON payload (and
vectors of the right size) are stored as sent or refused in Qdrant's error shape; any filter is
answered by search, scroll and count, or refused in that shape, never with a 5xx."""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.door import agents, app_factory, client_for, is_qdrant_error_shape
from tests.support.embedding_server import EMBEDDING_DIMS, EmbeddingServer, embed_text

COLLECTION = "/qdrant/collections/mem_mythos"
JSON = {"content-type": "application/json"}
TEXT = st.text(
    st.one_of(st.characters(codec=None), st.characters(categories=["Cs"]), st.sampled_from(",.[]")),
    max_size=12,
)
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), TEXT,
    st.sampled_from(["m1", "m1,m2", "discord", 1_718_000_000_000]),
)  # fmt: skip
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
KEYS = st.one_of(st.sampled_from(["text", "messageIds", "source", "timestamp", "a.b", ""]), TEXT)
MATCHES = st.one_of(
    st.fixed_dictionaries({"value": SCALARS}),
    st.fixed_dictionaries({"any": st.lists(SCALARS, max_size=3)}),
    st.fixed_dictionaries({"text": SCALARS}),
    st.dictionaries(TEXT, SCALARS, max_size=2),
)
RANGES = st.dictionaries(st.sampled_from(["gt", "gte", "lt", "lte", "x"]), SCALARS, max_size=3)
CONDITIONS = st.one_of(
    st.fixed_dictionaries({"key": KEYS, "match": MATCHES}),
    st.fixed_dictionaries({"key": KEYS, "range": RANGES}),
    st.fixed_dictionaries({"is_empty": st.fixed_dictionaries({"key": KEYS})}),
    st.fixed_dictionaries({"is_null": st.fixed_dictionaries({"key": KEYS})}),
    st.fixed_dictionaries(
        {"has_id": st.lists(st.one_of(SCALARS, st.uuids().map(str)), max_size=3)}
    ),
    st.fixed_dictionaries({"has_vector": st.one_of(st.sampled_from(["", "bm25"]), SCALARS)}),
    VALUES,
)
FILTERS = st.recursive(
    st.dictionaries(st.sampled_from(["must", "should", "must_not"]), CONDITIONS, max_size=2),
    lambda inner: st.dictionaries(
        st.sampled_from(["must", "should", "must_not", "min_should"]),
        st.lists(st.one_of(CONDITIONS, inner), max_size=3) | inner,
        max_size=3,
    ),
    max_leaves=6,
)


@pytest.fixture
def client(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[TestClient]:
    with (
        app_factory(redis_url, embeddings.url, tmp_path) as make,
        client_for(make(agents(accept_unlisted=True))) as test_client,
    ):
        body = {"vectors": {"size": EMBEDDING_DIMS, "distance": "Cosine"}}
        assert test_client.put(COLLECTION, json=body).status_code == 200
        yield test_client


def answered(response: Any, allowed: set[int]) -> Any:
    assert response.status_code < 500, response.text[:500]
    if response.status_code >= 400:
        assert is_qdrant_error_shape(response.json()), response.text[:500]
    assert response.status_code in allowed, response.text[:500]
    return response.json()


def same(stored: Any, sent: Any) -> bool:
    """Equal JSON, floats within a unit in the last place: the engines parse floats with
    serde_json, which may round the last bit differently from Python (Qdrant server alike)."""
    if isinstance(sent, float) and isinstance(stored, float):
        return math.isclose(stored, sent, rel_tol=1e-15, abs_tol=0.0)
    if isinstance(sent, dict) and isinstance(stored, dict):
        return stored.keys() == sent.keys() and all(same(stored[k], sent[k]) for k in sent)
    if isinstance(sent, list) and isinstance(stored, list):
        return len(stored) == len(sent) and all(map(same, stored, sent))
    return type(stored) is type(sent) and stored == sent


FUZZ = settings(
    max_examples=150, deadline=None, derandomize=True, database=None,
    suppress_health_check=list(HealthCheck),
)  # fmt: skip


def test_any_payload_is_stored_as_sent_or_refused(client: TestClient) -> None:
    @FUZZ
    @given(payload=st.dictionaries(TEXT, VALUES, max_size=4))
    def check(payload: dict[str, Any]) -> None:
        point = {"id": str(uuid.uuid4()), "vector": embed_text("x", EMBEDDING_DIMS),
                 "payload": payload}  # fmt: skip
        # ensure_ascii: lone surrogates travel as escapes, NaN as JavaScript's literal
        body = json.dumps({"points": [point]}, ensure_ascii=True)
        put = client.put(f"{COLLECTION}/points", content=body.encode(), headers=JSON)
        if answered(put, {200, 422})["status"] != "ok":
            return
        scroll = {"filter": {"must": [{"has_id": [point["id"]]}]}, "with_payload": True}
        found = answered(client.post(f"{COLLECTION}/points/scroll", json=scroll), {200})
        [stored] = found["result"]["points"]
        assert stored["id"] == point["id"] and same(stored["payload"], payload)

    check()


def test_any_filter_is_answered_or_refused(client: TestClient) -> None:
    stored = [{"id": str(uuid.uuid4()), "vector": embed_text(t, EMBEDDING_DIMS),
               "payload": {"text": t, "messageIds": f"m{n},m{n + 1}", "timestamp": n}}
              for n, t in enumerate(["the lake house", "the canoe", "the campfire"])]  # fmt: skip
    answered(client.put(f"{COLLECTION}/points", json={"points": stored}), {200})
    vector = embed_text("the lake", EMBEDDING_DIMS)

    @FUZZ
    @given(flt=FILTERS)
    def check(flt: dict[str, Any]) -> None:
        for call, extra in [("search", {"vector": vector, "limit": 5}), ("scroll", {}),
                            ("count", {})]:  # fmt: skip
            body = json.dumps({"filter": flt, **extra}, ensure_ascii=True).encode()
            response = client.post(f"{COLLECTION}/points/{call}", content=body, headers=JSON)
            answered(response, {200, 400, 422})

    check()

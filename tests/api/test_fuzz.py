"""Property-based fuzzing of every endpoint from the OpenAPI schema (schemathesis + Hypothesis).

Against the real app over the test Redis: no answer is a 5xx, every error has the documented
{error, detail} shape (OpenAI's under /v1/) and a status the schema documents for that
endpoint, and a refused request leaves Redis exactly as it was. The budget is fixed
(derandomized, EXAMPLES per endpoint and mode) so the suite stays well under a minute.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from shared.format.ids import message_id_problem
from shared.format.messages import Message
from shared.format.timestamps import MAX_STORABLE_MS, MIN_STORABLE_MS
from shared.state import keys
from tests.support.door import (
    agents,
    app_factory,
    client_for,
    is_error_shape,
    is_openai_error_shape,
    is_qdrant_error_shape,
    snapshot,
)
from tests.support.embedding_server import EMBEDDING_DIMS, EmbeddingServer

EXAMPLES = 100
OPERATIONS = [
    ("/save", "POST"),
    ("/retrieve", "POST"),
    ("/health", "GET"),
    ("/agents/{bot}/flush", "POST"),
    ("/agents/{bot}/stats", "GET"),
    ("/agents/{bot}/delete", "POST"),
    ("/agents/{bot}/known-ids", "POST"),
    ("/dead-letters", "GET"),
    ("/dead-letters/replay", "POST"),
    ("/agents", "GET"),
    ("/agents/{bot}/memories", "GET"),
    ("/agents/{bot}/memories/{point_id}", "GET"),
    ("/agents/{bot}/memories/{point_id}", "DELETE"),
    ("/agents/{bot}/delete/preview", "POST"),
    ("/agents/{bot}/messages/{message_id}", "PATCH"),
    ("/agents/{bot}/timeline", "GET"),
    ("/quarantine", "GET"),
    ("/quarantine/release", "POST"),
    ("/quarantine/discard", "POST"),
    ("/agents/{bot}/export", "GET"),
    ("/agents/{bot}/import", "POST"),
    ("/v1/embeddings", "POST"),
    # Qdrant's API for st-qdrant-memory (api/qdrant/), answering in Qdrant's error shape
    ("/qdrant/collections", "GET"),
    ("/qdrant/collections/{collection}", "GET"),
    ("/qdrant/collections/{collection}", "PUT"),
    ("/qdrant/collections/{collection}", "DELETE"),
    ("/qdrant/collections/{collection}/points", "PUT"),
    ("/qdrant/collections/{collection}/points/search", "POST"),
    ("/qdrant/collections/{collection}/points/scroll", "POST"),
    ("/qdrant/collections/{collection}/points/count", "POST"),
]
# The collection the /qdrant cases reach about half of the time (made first: mythos's), so
# the bodies get past "no such collection".
QDRANT_COLLECTION = "mem_mythos"
COLLECTION_BODY = {"vectors": {"size": EMBEDDING_DIMS, "distance": "Cosine"}}
# Headers the requests-style case carries that httpx sets itself.
DROPPED_HEADERS = {"content-length", "connection", "accept-encoding", "host"}
JSON = {"content-type": "application/json"}
FLUSH_WAIT_SECONDS = "0.2"  # no worker runs here: a waiting flush would wait its whole timeout


@pytest.fixture
def client(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[TestClient]:
    with (
        app_factory(redis_url, embeddings.url, tmp_path) as make,
        client_for(make(agents(accept_unlisted=True))) as test_client,
    ):
        yield test_client


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(redis_url, decode_responses=True)
    yield connection
    connection.close()


def _bounded_flush(path: str, query: dict[str, Any]) -> dict[str, Any]:
    if path.endswith("/flush") and "wait" in query:
        return {**query, "timeout": FLUSH_WAIT_SECONDS}
    if path.endswith("/export") and _valid_wait(query.get("timeout", "60")):
        return {**query, "timeout": FLUSH_WAIT_SECONDS}  # an export flushes first
    return query


def _valid_wait(value: Any) -> bool:
    """A timeout the export accepts (it would wait that long); an invalid one stays, a 422."""
    try:
        return 0 < float(value) <= 600
    except (TypeError, ValueError):
        return False


def send(client: TestClient, case: Any) -> Any:
    """The generated case, sent through the test client (schemathesis builds requests-style
    arguments; the app is reached in-process with its lifespan already running)."""
    kwargs = case.as_transport_kwargs(base_url="http://testserver")
    given_headers = kwargs.get("headers", {}).items()
    headers = {k: v for k, v in given_headers if k.lower() not in DROPPED_HEADERS}
    body: dict[str, Any] = {}
    if "json" in kwargs:
        body["json"] = kwargs["json"]
    elif kwargs.get("data") is not None:
        data = kwargs["data"]
        body["content"] = data if isinstance(data, bytes) else str(data).encode()
    params = _bounded_flush(case.path, kwargs.get("params") or {})
    return client.request(kwargs["method"], kwargs["url"], headers=headers, params=params, **body)


def test_the_fuzzed_operations_are_every_operation(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    described = {(path, method.upper()) for path, ops in paths.items() for method in ops}
    assert described == set(OPERATIONS)


# These take no input but a path segment (any string is a valid one) or none at all, so
# there is no invalid input to make for them.
NO_INVALID_INPUT = {"/health", "/agents/{bot}/stats", "/agents", "/qdrant/collections"}
NO_INVALID_QDRANT = {("/qdrant/collections/{collection}", m) for m in ("GET", "DELETE")}
CASES = [
    (path, method, mode)
    for path, method in OPERATIONS
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    if (path not in NO_INVALID_INPUT and (path, method) not in NO_INVALID_QDRANT)
    or mode is GenerationMode.POSITIVE
]


def _often_the_collection(case: Any) -> Any:
    """A /qdrant case names the existing collection when its own name has an even length."""
    given = case.path_parameters or {}
    if "collection" in given and len(str(given["collection"])) % 2 == 0:
        case.path_parameters = {**given, "collection": QDRANT_COLLECTION}
    return case


@pytest.mark.parametrize(("path", "method", "mode"), CASES)
def test_no_input_breaks_an_endpoint(
    client: TestClient, r: redis.Redis, path: str, method: str, mode: GenerationMode
) -> None:
    if path.startswith("/qdrant"):
        made = client.put(f"/qdrant/collections/{QDRANT_COLLECTION}", json=COLLECTION_BODY)
        assert made.status_code == 200, made.text
    document = client.get("/openapi.json").json()
    schema = schemathesis.openapi.from_dict(document)
    operation = schema[path][method]
    documented = set(document["paths"][path][method.lower()]["responses"])
    shaped = (
        is_openai_error_shape
        if path.startswith("/v1/")
        else is_qdrant_error_shape
        if path.startswith("/qdrant")
        else is_error_shape
    )

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode).map(_often_the_collection))
    def check(case: Any) -> None:
        before = snapshot(r)
        response = send(client, case)
        status = response.status_code
        assert status < 500, f"{status} for {case.as_curl_command()}: {response.text[:500]}"
        if status >= 400:
            assert response.headers["content-type"] == "application/json", response.text
            assert shaped(response.json()), response.text[:500]
            assert str(status) in documented, f"undocumented {status}: {response.text[:300]}"
            assert snapshot(r) == before, f"a refused request ({status}) changed Redis"
        elif response.headers["content-type"].startswith("application/x-ndjson"):
            for line in response.text.splitlines():  # an export: one JSON object a line
                json.loads(line)
        else:
            response.json()

    check()


# --- /save, message by message ------------------------------------------------------------------

# Text with every kind of character, lone surrogates included: written with ensure_ascii, they
# travel as `\ud800` escapes, as a JavaScript client's broken string would.
ANY_TEXT = st.text(
    st.one_of(
        st.characters(codec=None), st.characters(categories=["Cs"]), st.sampled_from(",\n\x00 ")
    ),
    max_size=40,
)
IDS = st.one_of(
    st.sampled_from(
        ["1250000000000000001", "self-3-1", "hermes:s1:4:user", "Dr. Who_1718000000000_2"]
    ),
    ANY_TEXT.filter(bool),
    st.text(max_size=300, min_size=250),
)
TIMES = st.one_of(
    st.none(),
    st.integers(-(10**20), 10**20),
    st.sampled_from([10**400, -(10**400), 1718000000000000, 253402300800000]),
    st.floats(),
    st.sampled_from(
        ["1970-01-01T00:00:00Z", "0001-01-01T00:00:00+14:00", "yesterday", "9999-12-31"]
    ),
)
MESSAGES = st.lists(
    st.fixed_dictionaries(
        {"message_id": IDS, "text": ANY_TEXT, "ts": TIMES},
        optional={
            "speaker_name": ANY_TEXT,
            "channel_id": IDS,
            "user_id": IDS,
            "speaker_kind": st.sampled_from(["user", "self"]),
        },
    ),
    max_size=6,
)


def _stored_messages(r: redis.Redis) -> list[Message]:
    prefix = keys.buffer("")
    return [
        Message.from_json(raw) for key in r.scan_iter(f"{prefix}*") for raw in r.lrange(key, 0, -1)
    ]


def test_every_message_is_accepted_skipped_a_duplicate_an_edit_or_refused(
    client: TestClient, r: redis.Redis
) -> None:
    @settings(max_examples=150, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(messages=MESSAGES)
    def check(messages: list[dict[str, Any]]) -> None:
        body = json.dumps({"bot": "mythos", "messages": messages}, ensure_ascii=True)
        response = client.post("/save", content=body.encode(), headers=JSON)
        assert response.status_code == 202, response.text
        answer = response.json()
        counted = answer["accepted"] + answer["duplicates"] + answer["skipped"]
        # a seen id with another text is an edit (README "Edits")
        changed = answer.get("edited", 0) + answer.get("stale", 0)
        assert counted + changed + answer.get("refused", 0) == len(messages)
        for stored in _stored_messages(r):
            assert message_id_problem(stored.id) is None
            assert MIN_STORABLE_MS <= stored.ts <= MAX_STORABLE_MS
            assert "\n" not in stored.speaker and len(stored.speaker) <= 256
            stored.text.encode("utf-8")  # no lone surrogate was stored

    check()

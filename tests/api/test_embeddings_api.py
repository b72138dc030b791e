"""POST /v1/embeddings: OpenAI's API served by memory-pool's own embedder, refusals in OpenAI's
shape, the keys, the limits, and slots of its own beside /retrieve's."""

from __future__ import annotations

import base64
import sys
from array import array
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.openai_compat.service import LOCAL_SLICE, EmbeddingSlots
from shared.agents import ApiKey
from shared.runtime import Runtime
from shared.settings import LOCAL_DEFAULT_MODEL
from tests.support.door import MakeApp, agents, client_for, is_openai_error_shape
from tests.support.embedding_server import EMBEDDING_DIMS, EmbeddingServer, embed_text
from tests.support.minilm import model_folder

URL = "/v1/embeddings"
MODEL = "text-embedding-3-small"  # the test stack's EMBEDDING_MODEL (tests/support/stack.py)
ALL = "all-agents-key-0123456789"
MYTHOS = "mythos-only-key-0123456789"
KEYS = [ApiKey(name="ops", key=ALL), ApiKey(name="bot", key=MYTHOS, agents=("mythos",))]
TEXTS = ["the lighthouse keeper waved", "Seraphina kept the harbour lights burning"]


def runtime_of(client: TestClient) -> Runtime:
    runtime: Runtime = client.app.state.runtime  # type: ignore[attr-defined]
    return runtime


def refusal(response: Any, status: int, param: str | None = None) -> dict[str, Any]:
    """The OpenAI-shaped error of a refused request, checked."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert is_openai_error_shape(response.json()), response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["param"] == param, error
    return error


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


# --- answers -----------------------------------------------------------------------------------


def test_a_text_is_one_embedding_in_openais_shape(client: TestClient) -> None:
    # st-qdrant-memory's "local" provider: {"model", "input": text}, reads data[0].embedding
    response = client.post(URL, json={"model": MODEL, "input": TEXTS[0]})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"object", "data", "model", "usage"}
    assert body["object"] == "list" and body["model"] == MODEL
    assert [set(item) for item in body["data"]] == [{"object", "index", "embedding"}]
    assert body["data"][0]["object"] == "embedding" and body["data"][0]["index"] == 0
    assert len(body["data"][0]["embedding"]) == EMBEDDING_DIMS
    usage = body["usage"]
    assert usage["prompt_tokens"] == usage["total_tokens"] >= len(TEXTS[0].split())


def test_a_list_is_one_embedding_per_text_in_order(client: TestClient) -> None:
    body = client.post(URL, json={"model": MODEL, "input": [*TEXTS, TEXTS[0]]}).json()
    assert [item["index"] for item in body["data"]] == [0, 1, 2]
    vectors = [item["embedding"] for item in body["data"]]
    assert vectors[0] == vectors[2] != vectors[1]


def test_the_vectors_are_memory_pools_own(client: TestClient) -> None:
    """SillyTavern's points compare with memory-pool's: the same model makes both."""
    body = client.post(URL, json={"model": MODEL, "input": TEXTS}).json()
    own = runtime_of(client).embedder.embed(TEXTS)
    assert [item["embedding"] for item in body["data"]] == own
    assert own == [embed_text(text, EMBEDDING_DIMS) for text in TEXTS]  # the provider's


def test_base64_is_little_endian_float32_of_the_same_vector(client: TestClient) -> None:
    floats = client.post(URL, json={"model": MODEL, "input": TEXTS[1]}).json()
    packed = client.post(
        URL, json={"model": MODEL, "input": TEXTS[1], "encoding_format": "base64"}
    ).json()
    decoded = array("f", base64.b64decode(packed["data"][0]["embedding"]))
    if sys.byteorder == "big":
        decoded.byteswap()
    assert decoded.tolist() == floats["data"][0]["embedding"]  # the test server's are float32


def test_a_lone_surrogate_is_embedded_as_save_stores_it(client: TestClient) -> None:
    raw = b'{"model": "' + MODEL.encode() + b'", "input": "caf\\ud800 lights"}'
    response = client.post(URL, content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    assert response.json()["data"][0]["embedding"] == embed_text("caf\ufffd lights", 128)


# --- the model and its size --------------------------------------------------------------------


def test_another_model_name_is_served_by_memory_pools_model(client: TestClient) -> None:
    # st-qdrant-memory's "local" provider sends its hidden OpenAI menu's model
    body = client.post(URL, json={"model": "text-embedding-3-large", "input": TEXTS[0]}).json()
    assert body["model"] == MODEL  # says which model embedded
    assert body["data"][0]["embedding"] == embed_text(TEXTS[0], EMBEDDING_DIMS)


def test_another_model_is_refused_when_any_model_is_off(make_app: MakeApp) -> None:
    with client_for(make_app(MEMORY_POOL_EMBEDDINGS_ANY_MODEL="false")) as client:
        response = client.post(URL, json={"model": "text-embedding-3-large", "input": "hi"})
        error = refusal(response, 404, "model")
        assert error["code"] == "model_not_found" and error["type"] == "invalid_request_error"
        assert MODEL in error["message"] and "EMBEDDING_MODEL" in error["message"]
        assert client.post(URL, json={"model": MODEL, "input": "hi"}).status_code == 200


def test_the_models_own_dimensions_may_be_asked_for(client: TestClient) -> None:
    body = {"model": MODEL, "input": TEXTS[0], "dimensions": EMBEDDING_DIMS}
    response = client.post(URL, json=body)
    assert response.status_code == 200, response.text
    assert len(response.json()["data"][0]["embedding"]) == EMBEDDING_DIMS


@pytest.mark.parametrize("dimensions", [64, EMBEDDING_DIMS + 1, 3072])
def test_other_dimensions_are_refused(client: TestClient, dimensions: int) -> None:
    body = {"model": MODEL, "input": TEXTS[0], "dimensions": dimensions}
    error = refusal(client.post(URL, json=body), 400, "dimensions")
    assert f"{EMBEDDING_DIMS} dimensions" in error["message"]


# --- refusals of the request --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": MODEL, "input": ""}, "input"),
        ({"model": MODEL, "input": []}, "input"),
        ({"model": MODEL, "input": ["fine", ""]}, "input"),
        ({"model": MODEL, "input": [1, 2, 3]}, "input"),  # token arrays
        ({"model": MODEL, "input": [[1, 2]]}, "input"),
        ({"model": MODEL, "input": None}, "input"),
        ({"model": MODEL}, "input"),
        ({"input": "hi"}, "model"),
        ({"model": "", "input": "hi"}, "model"),
        ({"model": 5, "input": "hi"}, "model"),
        ({"model": MODEL, "input": "hi", "encoding_format": "int8"}, "encoding_format"),
        ({"model": MODEL, "input": "hi", "dimensions": 0}, "dimensions"),
        ({"model": MODEL, "input": "hi", "dimensions": "128"}, "dimensions"),
        ({"model": MODEL, "input": "hi", "dimensions": True}, "dimensions"),
        ({"model": MODEL, "input": "hi", "dimensions": "9" * 100_000}, "dimensions"),
    ],
)
def test_a_bad_request_is_400_naming_its_field(
    client: TestClient, body: dict[str, Any], param: str
) -> None:
    refusal(client.post(URL, json=body), 400, param)


BODY_IDS = ["cut-short", "not-utf-8", "5000-digits", "not-an-object", "nested-too-deep", "empty",
            "text-plain", "none"]  # fmt: skip


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b'{"model": "x", "input": ', "application/json"),
        (b'{"model": "x", "input": "caf\xff"}', "application/json"),  # not UTF-8
        (b'{"model": "x", "input": ' + b"1" * 5000 + b"}", "application/json"),
        (b'["model", "input"]', "application/json"),
        (b'{"model": "x", "input": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "application/json"),
        (b"", "application/json"),
        (b'{"model": "x", "input": "hi"}', "text/plain"),  # no preflight: not taken
        (b'{"model": "x", "input": "hi"}', ""),
    ],
    ids=BODY_IDS,
)
def test_a_body_that_is_not_a_json_object_is_400(
    client: TestClient, content: bytes, content_type: str
) -> None:
    headers = {"content-type": content_type} if content_type else {}
    refusal(client.post(URL, content=content, headers=headers), 400)


def test_routing_errors_under_v1_take_openais_shape(client: TestClient) -> None:
    refusal(client.get(URL), 405)
    assert refusal(client.post("/v1/chat/completions", json={}), 404)["code"] is None


# --- limits ---------------------------------------------------------------------------------------


def test_more_inputs_than_save_takes_messages_is_413(make_app: MakeApp) -> None:
    with client_for(make_app(MEMORY_POOL_MAX_MESSAGES=3)) as client:
        error = refusal(client.post(URL, json={"model": MODEL, "input": ["a b"] * 4}), 413, "input")
        assert "MEMORY_POOL_MAX_MESSAGES" in error["message"]
        assert error["code"] == "request_too_large"
        assert client.post(URL, json={"model": MODEL, "input": ["a b"] * 3}).status_code == 200


def test_more_characters_than_save_takes_is_413(make_app: MakeApp) -> None:
    with client_for(make_app(MEMORY_POOL_MAX_CHARS=100)) as client:
        response = client.post(URL, json={"model": MODEL, "input": ["x" * 60, "y" * 41]})
        assert "MEMORY_POOL_MAX_CHARS" in refusal(response, 413, "input")["message"]
        assert client.post(URL, json={"model": MODEL, "input": "x" * 100}).status_code == 200


def test_a_body_over_the_doors_limit_is_413_in_openais_shape(make_app: MakeApp) -> None:
    with client_for(make_app(MEMORY_POOL_MAX_BODY_BYTES=2048)) as client:
        response = client.post(URL, json={"model": MODEL, "input": ["x" * 100] * 30})
        error = refusal(response, 413)
        assert error["code"] == "request_too_large" and "2048 bytes" in error["message"]


# --- the embedding provider ---------------------------------------------------------------------


def test_an_input_the_provider_refuses_is_400(
    client: TestClient, embeddings: EmbeddingServer
) -> None:
    embeddings.reject_inputs_containing("forbidden-word")
    response = client.post(URL, json={"model": MODEL, "input": ["fine", "a forbidden-word"]})
    error = refusal(response, 400, "input")
    assert error["code"] == "input_rejected" and error["message"].startswith("input[1] ")


@pytest.mark.parametrize("status", [500, 503, 429, 401])
def test_the_provider_down_is_503(
    client: TestClient, embeddings: EmbeddingServer, status: int
) -> None:
    embeddings.fail_next(status, times=3)
    error = refusal(client.post(URL, json={"model": MODEL, "input": "hi"}), 503)
    assert error["type"] == "server_error" and error["code"] == "upstream_unavailable"


def test_busy_embeddings_slots_leave_retrieve_its_own(make_app: MakeApp) -> None:
    app = make_app(MEMORY_POOL_EMBEDDINGS_CONCURRENCY=2, MEMORY_POOL_EMBEDDING_TIMEOUT=0.3)
    with client_for(app) as client:
        slots: EmbeddingSlots = client.app.state.embedding_slots  # type: ignore[attr-defined]
        assert client.portal is not None
        for _ in range(2):
            client.portal.call(slots.take)
        busy = client.post(URL, json={"model": MODEL, "input": "hi"})
        recalled = client.post("/retrieve", json={"bot": "mythos", "query_text": "lighthouse"})
        client.portal.call(slots.give_back)
        after = client.post(URL, json={"model": MODEL, "input": "hi"})
    error = refusal(busy, 503)
    assert error["code"] == "busy" and "MEMORY_POOL_EMBEDDINGS_CONCURRENCY" in error["message"]
    assert recalled.status_code == 200, recalled.text
    assert after.status_code == 200


# --- keys -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        (bearer("wrong-key-0123456789"), 401),
        ({"Authorization": "Basic " + ALL}, 401),
        (bearer(MYTHOS), 200),  # a key scoped to one agent embeds too
        (bearer(ALL), 200),
        ({"X-API-Key": ALL}, 200),
    ],
    ids=["none", "wrong", "not-bearer", "scoped", "global", "x-api-key"],
)
def test_with_keys_any_valid_key_embeds(
    make_app: MakeApp, headers: dict[str, str], status: int
) -> None:
    with client_for(make_app(agents(api_keys=KEYS))) as client:
        response = client.post(URL, json={"model": MODEL, "input": "hi"}, headers=headers)
    if status == 200:
        assert response.status_code == 200, response.text
    else:
        assert refusal(response, 401)["code"] == "invalid_api_key"


def test_without_keys_it_is_open(client: TestClient) -> None:
    assert client.post(URL, json={"model": MODEL, "input": "hi"}).status_code == 200
    # as on every endpoint, a key that matches none is refused: the key field stays empty
    response = client.post(URL, json={"model": MODEL, "input": "hi"}, headers=bearer("anything"))
    assert refusal(response, 401)["code"] == "invalid_api_key"


# --- the local model (`memory-pool serve`'s default) ----------------------------------------------


def test_the_local_model_serves_its_own_vectors(make_app: MakeApp) -> None:
    folder = model_folder()
    assert folder is not None, "no MiniLM folder: run `python -m tests.support.minilm`"
    local = {"EMBEDDING_PROVIDER": "local", "EMBEDDING_MODEL": LOCAL_DEFAULT_MODEL,
             "EMBEDDING_MODEL_PATH": str(folder)}  # fmt: skip
    texts = [f"{TEXTS[n % 2]} on night {n}" for n in range(LOCAL_SLICE * 2 + 3)]
    with client_for(make_app(**local)) as client:
        one = client.post(URL, json={"model": "text-embedding-3-large", "input": TEXTS[0]})
        many = client.post(URL, json={"model": LOCAL_DEFAULT_MODEL, "input": texts})
        sized = client.post(URL, json={"model": "x", "input": "hi", "dimensions": 384})
        embedder = runtime_of(client).embedder
        own_one, own_many = embedder.embed([TEXTS[0]]), embedder.embed(texts)
    assert one.status_code == many.status_code == sized.status_code == 200, many.text
    assert one.json()["model"] == LOCAL_DEFAULT_MODEL
    assert [item["embedding"] for item in one.json()["data"]] == own_one
    served = [item["embedding"] for item in many.json()["data"]]
    assert len(served) == len(texts) and len(served[0]) == 384
    for mine, theirs in zip(served, own_many, strict=True):  # in slices, as in one call
        assert mine == pytest.approx(theirs, abs=1e-5)

"""api/save_body.py parses /save's body in one pass, and answers every body exactly as FastAPI's
own parsing of a `SaveRequest` parameter does: the same model, or the same refusal. Checked side
by side against a FastAPI route that takes `body: SaveRequest`, with memory-pool's error
handlers on both."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.errors import install_error_handlers
from api.save_body import OPENAPI_BODY, document_save_body, save_body
from api.schemas import SaveRequest


def _apps() -> tuple[TestClient, TestClient]:
    fastapi_parses = FastAPI()
    one_pass = FastAPI()

    @fastapi_parses.post("/save")
    async def reference(body: SaveRequest) -> dict[str, str]:
        return {"model": repr(body)}  # repr: a lone surrogate cannot go out as JSON

    @one_pass.post("/save", openapi_extra=OPENAPI_BODY)
    async def parsed(request: Request) -> dict[str, str]:
        return {"model": repr(await save_body(request))}

    document_save_body(one_pass)
    for app in (fastapi_parses, one_pass):
        install_error_handlers(app)
    return TestClient(fastapi_parses), TestClient(one_pass)


REFERENCE, ONE_PASS = _apps()
JSON = {"content-type": "application/json"}


def _same_answer(content: bytes, headers: dict[str, str]) -> None:
    expected = REFERENCE.post("/save", content=content, headers=headers)
    found = ONE_PASS.post("/save", content=content, headers=headers)
    assert (found.status_code, found.json()) == (expected.status_code, expected.json())


ODD_BODIES = [
    b"",
    b"{",
    b"[]",
    b'["mythos"]',
    b"null",
    b'"text"',
    b"{}",
    b'{"bot": "m"}',
    b'{"bot": "m", "messages": []}',
    b'{"bot": "", "messages": []}',
    b'{"bot": "m", "bot": "n", "messages": []}',
    b'{"bot": "m", "messages": [{"message_id": "a\\ud800", "text": "x\\udfff"}]}',
    b'{"bot": "m", "messages": [{"message_id": "a", "ts": 1e400}]}',
    b'{"bot": "m", "messages": [{"message_id": "a", "ts": NaN}]}',
    b'{"bot": "m", "messages": [{"message_id": "a", "ts": -Infinity}]}',
    b'{"bot": "m", "messages": [{"message_id": "a", "ts": 1' + b"0" * 400 + b"}]}",
    b'{"bot": "m", "messages": [{"message_id": 1' + b"0" * 5000 + b"}]}",
    b'{"bot": "m", "messages": [{"message_id": 12, "user_id": 7}]}',
    b'{"bot": "m", "messages": [{"message_id": 1.5}]}',
    b'{"bot": "m", "messages": [{"message_id": true}]}',
    b'{"bot": "m", "messages": [{"message_id": ""}]}',
    b'{"bot": "m", "messages": [{"text": "no id"}]}',
    b'{"bot": "m", "messages": [{"message_id": "a", "speaker_kind": "bot"}]}',
    b'{"bot": "m", "source": "", "messages": []}',
    b'{"bot": "m", "messages": {"0": {"message_id": "a"}}}',
    b'{"bot": "m", "messages": [], "batch_import": "yes"}',
    b'{"bot": "m", "messages": [], "batch_import": "maybe"}',
    b"\xff\xfe{}",
    b'{"bot": "m\xff", "messages": []}',
]


@pytest.mark.parametrize("content", ODD_BODIES)
@pytest.mark.parametrize(
    "headers",
    [JSON, {"content-type": "application/vnd.api+json"}, {"content-type": "text/plain"}, {}],
    ids=["json", "+json", "text", "none"],
)
def test_odd_bodies_get_the_answer_fastapi_gives(content: bytes, headers: dict[str, str]) -> None:
    _same_answer(content, headers)


SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
MESSAGE = st.dictionaries(
    st.sampled_from(["message_id", "text", "ts", "speaker_kind", "user_id", "channel_id", "x"]),
    SCALARS | st.sampled_from(["self", "user", "1250000000000000001"]),
)
BODY = st.fixed_dictionaries(
    {"bot": st.text(max_size=6) | st.integers()},
    optional={"messages": st.lists(MESSAGE, max_size=4) | SCALARS, "source": SCALARS},
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(BODY)
def test_any_json_body_gets_the_answer_fastapi_gives(body: dict[str, Any]) -> None:
    _same_answer(json.dumps(body).encode(), JSON)


def test_the_body_is_documented_as_fastapi_documents_a_model_parameter() -> None:
    expected = REFERENCE.get("/openapi.json").json()
    found = ONE_PASS.get("/openapi.json").json()
    operation = ("paths", "/save", "post", "requestBody")
    assert _at(found, operation) == _at(expected, operation)
    for model in ("SaveRequest", "SaveMessage"):
        schemas = ("components", "schemas", model)
        assert _at(found, schemas) == _at(expected, schemas)


def _at(document: dict[str, Any], path: tuple[str, ...]) -> Any:
    for part in path:
        document = document[part]
    return document

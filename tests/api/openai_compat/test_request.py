"""The request's rules: the model, the dimensions, the limits; OpenAI's error shape."""

from __future__ import annotations

import pytest

from api.openai_compat.errors import OpenAIError, speaks_openai, translated
from api.openai_compat.request import check_dimensions, check_limits, check_model, parse
from shared.settings import Settings

JSON = "application/json"


def test_the_model_and_its_own_size_pass() -> None:
    check_model("mini", "mini", Settings(MEMORY_POOL_EMBEDDINGS_ANY_MODEL=False))
    check_model("text-embedding-3-large", "mini", Settings())
    check_dimensions(None, 384, "mini")
    check_dimensions(384, 384, "mini")


def test_another_model_is_404_when_any_model_is_off() -> None:
    with pytest.raises(OpenAIError) as refused:
        check_model("Mini", "mini", Settings(MEMORY_POOL_EMBEDDINGS_ANY_MODEL=False))
    error = refused.value.body()["error"]
    assert refused.value.status == 404
    assert (error["param"], error["code"]) == ("model", "model_not_found")


def test_another_size_is_400() -> None:
    with pytest.raises(OpenAIError) as refused:
        check_dimensions(256, 384, "mini")
    assert refused.value.status == 400 and refused.value.param == "dimensions"


@pytest.mark.parametrize(
    ("texts", "refused"),
    [(["ab"] * 3, False), (["ab"] * 4, True), (["a" * 10], False), (["a" * 6, "b" * 5], True)],
)
def test_saves_limits_hold(texts: list[str], refused: bool) -> None:
    settings = Settings(MEMORY_POOL_MAX_MESSAGES=3, MEMORY_POOL_MAX_CHARS=10)
    if not refused:
        check_limits(texts, settings)
        return
    with pytest.raises(OpenAIError) as error:
        check_limits(texts, settings)
    assert error.value.status == 413 and error.value.code == "request_too_large"


def test_a_body_is_parsed_with_its_surrogates_made_readable() -> None:
    body = parse(b'{"model": "m", "input": ["a\\ud800"], "user": "u"}', JSON)
    assert body.input == ["a\ufffd"] and body.encoding_format is None


@pytest.mark.parametrize(
    ("raw", "content_type", "param"),
    [
        (b"{", JSON, None),
        (b"[]", JSON, None),
        (b'{"model": "m", "input": "x"}', "text/plain", None),
        (b'{"model": "m", "input": [3, 4]}', JSON, "input"),
        (b'{"model": "m", "input": "x", "encoding_format": "hex"}', JSON, "encoding_format"),
        (b'{"model": "m", "input": "x", "dimensions": 1.5}', JSON, "dimensions"),
        (b'{"input": "x"}', JSON, "model"),
    ],
)
def test_a_bad_body_is_400(raw: bytes, content_type: str, param: str | None) -> None:
    with pytest.raises(OpenAIError) as refused:
        parse(raw, content_type)
    assert refused.value.status == 400 and refused.value.param == param


@pytest.mark.parametrize(
    ("path", "openai"),
    [("/v1/embeddings", True), ("/v1", True), ("/v1x", False), ("/save", False), ("", False)],
)
def test_the_paths_that_speak_openai(path: str, openai: bool) -> None:
    assert speaks_openai(path) is openai


@pytest.mark.parametrize(
    ("status", "code", "kind", "openai_code"),
    [
        (401, "unauthorized", "invalid_request_error", "invalid_api_key"),
        (404, "not_found", "invalid_request_error", None),
        (413, "request_too_large", "invalid_request_error", "request_too_large"),
        (503, "upstream_unavailable", "server_error", "upstream_unavailable"),
        (500, "internal_error", "server_error", "internal_error"),
    ],
)
def test_memory_pools_errors_in_openais_shape(
    status: int, code: str, kind: str, openai_code: str | None
) -> None:
    assert translated(status, code, "why \ud800") == {
        "error": {"message": "why \ufffd", "type": kind, "param": None, "code": openai_code}
    }

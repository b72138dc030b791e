"""Tests for the OpenAI-compatible embedding test server, driven by the real openai client."""

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.support.embedding_server import (
    DEFAULT_MODEL,
    EmbeddingServer,
    count_tokens,
    embed_text,
)

MODEL = DEFAULT_MODEL
REPO_ROOT = Path(__file__).resolve().parents[2]


def cosine(a: list[float], b: list[float]) -> float:
    # Vectors are unit length, so the dot product is the cosine.
    return sum(x * y for x, y in zip(a, b, strict=True))


@pytest.fixture
def server() -> Iterator[EmbeddingServer]:
    with EmbeddingServer(dims=64) as srv:
        yield srv


@pytest.fixture
def client(server: EmbeddingServer) -> Iterator[openai.OpenAI]:
    # No retries: each test decides explicitly whether it wants the client's retry logic.
    with openai.OpenAI(base_url=server.url, api_key="test", max_retries=0) as c:
        yield c


def embed(client: openai.OpenAI, texts: list[str], **kwargs: object) -> list[list[float]]:
    response = client.embeddings.create(model=MODEL, input=texts, **kwargs)  # type: ignore[arg-type]
    return [item.embedding for item in response.data]


# --------------------------------------------------------------------------- vectors


def test_float_and_base64_return_the_same_vectors(client: openai.OpenAI) -> None:
    texts = ["the cat sat on the mat", "Quarterly revenue grew", "ünïcödé words ok"]
    expected = [embed_text(t, 64) for t in texts]

    as_float = client.embeddings.create(model=MODEL, input=texts, encoding_format="float")
    as_base64 = client.embeddings.create(model=MODEL, input=texts)  # client default: base64

    assert [d.embedding for d in as_float.data] == expected
    assert [d.embedding for d in as_base64.data] == expected
    assert [d.index for d in as_float.data] == [0, 1, 2]
    assert as_float.object == "list"
    assert as_float.model == MODEL
    tokens = sum(count_tokens(t) for t in texts)
    assert as_float.usage.prompt_tokens == as_float.usage.total_tokens == tokens


def test_single_string_and_token_arrays(client: openai.OpenAI) -> None:
    single = client.embeddings.create(model=MODEL, input="hello world")
    assert [d.embedding for d in single.data] == [embed_text("hello world", 64)]

    tokens = client.embeddings.create(model=MODEL, input=[[1, 2, 3], [4, 5]])
    assert [d.embedding for d in tokens.data] == [embed_text("1 2 3", 64), embed_text("4 5", 64)]
    assert tokens.usage.prompt_tokens == 5  # token arrays count exactly


def test_dimensions_override_the_default(client: openai.OpenAI) -> None:
    (default,) = embed(client, ["memory of a rainy day"])
    (small,) = embed(client, ["memory of a rainy day"], dimensions=16)

    assert len(default) == 64
    assert small == embed_text("memory of a rainy day", 16)
    assert sum(x * x for x in small) == pytest.approx(1.0, abs=1e-6)


def test_related_texts_score_higher_than_unrelated(client: openai.OpenAI) -> None:
    query, related, unrelated = embed(
        client,
        ["the cat sat on the mat", "a cat sat on a mat", "quarterly tax filing deadline"],
        dimensions=256,
    )
    assert cosine(query, related) > 0.4
    assert abs(cosine(query, unrelated)) < 0.2
    assert cosine(query, related) > cosine(query, unrelated) + 0.3


def test_embed_text_is_deterministic_and_handles_wordless_text() -> None:
    assert embed_text("Same Words", 32) == embed_text("same words!", 32)
    assert embed_text("", 8) == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    with pytest.raises(ValueError):
        embed_text("x", 0)


# --------------------------------------------------------------------------- limits


def error_json(exc: openai.APIStatusError) -> dict[str, object]:
    body = exc.response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


def test_at_most_2048_inputs_per_request(client: openai.OpenAI) -> None:
    assert len(embed(client, ["w"] * 2048)) == 2048

    with pytest.raises(openai.BadRequestError) as caught:
        embed(client, ["w"] * 2049)
    error = error_json(caught.value)
    assert error["type"] == "invalid_request_error"
    assert "'$.input' is invalid" in str(error["message"])


def test_too_long_input_is_a_400_with_openai_message(client: openai.OpenAI) -> None:
    too_long = "word " * 8193  # 8193 words but 40965 chars: ceil(40965 / 4) = 10242 tokens
    expected = count_tokens(too_long)
    assert expected == 10242

    with pytest.raises(openai.BadRequestError) as caught:
        embed(client, ["fine", too_long])
    error = error_json(caught.value)
    assert error == {
        "message": (
            f"This model's maximum context length is 8192 tokens, however you requested "
            f"{expected} tokens ({expected} in your prompt; 0 for the completion). "
            "Please reduce your prompt; or completion length."
        ),
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }


def test_token_count_uses_the_larger_estimate() -> None:
    assert count_tokens("a b c d e f") == 6  # words win: 11 chars / 4 -> 3
    assert count_tokens("x" * 40) == 10  # characters win: one word


def test_max_input_tokens_is_configurable() -> None:
    with (
        EmbeddingServer(max_input_tokens=5) as srv,
        openai.OpenAI(base_url=srv.url, api_key="t", max_retries=0) as c,
    ):
        assert len(embed(c, ["a b c d e"])) == 1
        with pytest.raises(openai.BadRequestError, match="maximum context length is 5 tokens"):
            embed(c, ["a b c d e f"])


def test_empty_input_is_rejected(client: openai.OpenAI) -> None:
    for bad in ("", [], ["ok", ""]):
        with pytest.raises(openai.BadRequestError) as caught:
            client.embeddings.create(model=MODEL, input=bad)
        assert str(error_json(caught.value)["message"]).startswith("'$.input' is invalid.")


def test_tokens_per_request_limit() -> None:
    with (
        EmbeddingServer(max_tokens_per_request=10) as srv,
        openai.OpenAI(base_url=srv.url, api_key="t", max_retries=0) as c,
    ):
        with pytest.raises(openai.BadRequestError) as caught:
            embed(c, ["one two three four five six", "seven eight nine ten eleven"])
        assert error_json(caught.value)["code"] == "max_tokens_per_request"


# --------------------------------------------------------------------------- faults


def test_fail_next_429_sends_retry_after(server: EmbeddingServer, client: openai.OpenAI) -> None:
    server.fail_next(429, retry_after=2)

    with pytest.raises(openai.RateLimitError) as caught:
        embed(client, ["hi"])
    assert caught.value.status_code == 429
    assert caught.value.response.headers["retry-after"] == "2"
    assert caught.value.code == "rate_limit_exceeded"
    assert error_json(caught.value)["code"] == "rate_limit_exceeded"
    assert len(embed(client, ["hi"])) == 1  # one-shot: the next request succeeds


def test_fail_next_500_times(server: EmbeddingServer, client: openai.OpenAI) -> None:
    server.fail_next(500, times=2)

    for _ in range(2):
        with pytest.raises(openai.InternalServerError) as caught:
            embed(client, ["hi"])
        assert error_json(caught.value)["type"] == "server_error"
    assert len(embed(client, ["hi"])) == 1


def test_real_client_retries_honour_retry_after(server: EmbeddingServer) -> None:
    server.fail_next(503, times=2, retry_after=0.01)
    with openai.OpenAI(base_url=server.url, api_key="t", max_retries=2) as retrying:
        assert len(embed(retrying, ["hi"])) == 1
    assert [r.status for r in server.requests] == [503, 503, 200]


def test_hang_next_exceeds_client_timeout(server: EmbeddingServer) -> None:
    server.hang_next(0.5)
    with openai.OpenAI(base_url=server.url, api_key="t", max_retries=0, timeout=0.2) as c:
        with pytest.raises(openai.APITimeoutError):
            embed(c, ["slow"])
        assert len(embed(c, ["fast again"])) == 1


def test_reject_inputs_containing_fails_the_whole_request(
    server: EmbeddingServer, client: openai.OpenAI
) -> None:
    server.reject_inputs_containing("POISON")

    with pytest.raises(openai.BadRequestError) as caught:
        embed(client, ["harmless", "this has POISON inside", "also harmless"])
    error = error_json(caught.value)
    assert error["type"] == "invalid_request_error"
    assert "POISON" in str(error["message"])
    assert "harmless" not in str(error["message"])  # like OpenAI: no hint which input failed
    assert len(embed(client, ["harmless"])) == 1

    server.clear_faults()
    assert len(embed(client, ["POISON is fine now"])) == 1


# --------------------------------------------------------------------------- log, auth, routes


def test_request_log_records_each_call(server: EmbeddingServer, client: openai.OpenAI) -> None:
    embed(client, ["a", "b", "c"], dimensions=8, encoding_format="float")
    server.fail_next(429)
    with pytest.raises(openai.RateLimitError):
        embed(client, ["d"])

    first, second = server.requests
    assert (first.model, first.n_inputs, first.dimensions) == (MODEL, 3, 8)
    assert (first.encoding_format, first.status) == ("float", 200)
    assert (second.n_inputs, second.dimensions, second.encoding_format) == (1, None, "base64")
    assert second.status == 429
    assert first.time <= second.time

    server.reset_log()
    assert server.requests == []


def test_api_key_is_checked() -> None:
    with EmbeddingServer(api_key="sk-secret-key") as srv:
        with openai.OpenAI(base_url=srv.url, api_key="sk-wrong-key", max_retries=0) as bad:
            with pytest.raises(openai.AuthenticationError) as caught:
                embed(bad, ["hi"])
            assert error_json(caught.value)["code"] == "invalid_api_key"
            assert "sk-secret-key" not in caught.value.message

        missing = httpx.post(f"{srv.url}/embeddings", json={"model": MODEL, "input": "hi"})
        assert missing.status_code == 401
        assert missing.json()["error"]["type"] == "invalid_request_error"

        with openai.OpenAI(base_url=srv.url, api_key="sk-secret-key", max_retries=0) as good:
            assert len(embed(good, ["hi"])) == 1
            assert [m.id for m in good.models.list()] == [DEFAULT_MODEL]
        assert [r.status for r in srv.requests] == [401, 401, 200]


def test_models_endpoint_and_any_model_name(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == [DEFAULT_MODEL]
    assert client.models.retrieve(DEFAULT_MODEL).id == DEFAULT_MODEL
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")
    response = client.embeddings.create(model="my-local-model", input="hi")
    assert response.model == "my-local-model"


def test_unknown_route_is_an_openai_404(server: EmbeddingServer) -> None:
    response = httpx.post(f"{server.url}/nope", json={})
    assert response.status_code == 404
    assert response.json()["error"]["message"] == "Invalid URL (POST /v1/nope)"


# --------------------------------------------------------------------------- lifecycle


def test_stop_and_start_again_on_the_same_port(
    server: EmbeddingServer, client: openai.OpenAI
) -> None:
    url = server.url
    assert len(embed(client, ["before"])) == 1  # leaves a pooled keep-alive connection

    server.stop()
    assert not server.running
    with pytest.raises(openai.APIConnectionError):
        embed(client, ["during outage"])

    server.start()
    assert server.url == url
    assert len(embed(client, ["after"])) == 1


def test_cli_prints_ready_and_stops_on_sigterm() -> None:
    command = [sys.executable, "-m", "tests.support.embedding_server", "--port", "0", "--dims", "8"]
    with subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        ready, url = proc.stdout.readline().split()
        assert ready == "READY"
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        with openai.OpenAI(base_url=url, api_key="t", max_retries=0) as c:
            assert embed(c, ["hi"]) == [embed_text("hi", 8)]
        proc.terminate()
        assert proc.wait(timeout=5) == 0

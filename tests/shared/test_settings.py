"""Tests of the settings: environment names, provider defaults and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from shared.settings import Settings

ENV_NAMES = [
    "REDIS_URL",
    "QDRANT_URL",
    "QDRANT_API_KEY",
    "EMBEDDING_PROVIDER",
    "EMBEDDING_BASE_URL",
    "OPENAI_API_KEY",
    "EMBEDDING_MODEL",
    "EMBEDDING_DIMENSIONS",
    "EMBEDDING_MODEL_PATH",
    "MEMORY_POOL_CONFIG",
    "MEMORY_POOL_DATA_DIR",
]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


def test_reads_the_documented_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    values = {
        "REDIS_URL": "redis://r:6379/1",
        "QDRANT_URL": "http://q:6333",
        "QDRANT_API_KEY": "qk",
        "EMBEDDING_PROVIDER": "openai",
        "EMBEDDING_BASE_URL": "http://e/v1",
        "OPENAI_API_KEY": "sk",
        "EMBEDDING_MODEL": "m",
        "EMBEDDING_DIMENSIONS": "256",
        "EMBEDDING_MODEL_PATH": "/models/x",
        "MEMORY_POOL_CONFIG": "/etc/agents.yaml",
        "MEMORY_POOL_DATA_DIR": "/var/lib/mp",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert (settings.redis_url, settings.qdrant_url, settings.qdrant_api_key) == (
        "redis://r:6379/1",
        "http://q:6333",
        "qk",
    )
    assert (settings.embedding_provider, settings.embedding_base_url, settings.openai_api_key) == (
        "openai",
        "http://e/v1",
        "sk",
    )
    assert (settings.embedding_model, settings.embedding_dimensions) == ("m", 256)
    assert settings.embedding_model_path == Path("/models/x")
    assert settings.config_path == Path("/etc/agents.yaml")
    assert settings.data_dir == Path("/var/lib/mp")


def test_defaults() -> None:
    settings = Settings()
    assert settings.embedding_provider == "local"
    assert settings.embedding_model == "sentence-transformers/all-MiniLM-L6-v2"
    assert settings.default_source == "discord"
    assert settings.max_messages_per_request == 500
    assert settings.dedupe_ttl_seconds == 30 * 86400


def test_openai_key_alone_never_switches_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live")
    assert Settings().embedding_provider == "local"
    monkeypatch.setenv("EMBEDDING_PROVIDER", "openai")
    assert Settings().embedding_model == "text-embedding-3-large"


@pytest.mark.parametrize(
    ("name", "value"), [("EMBEDDING_PROVIDER", "cohere"), ("EMBEDDING_DIMENSIONS", "0")]
)
def test_refuses_bad_values(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError, match=name):
        Settings()


@pytest.mark.parametrize("days", ["0.000001", "0.00001"])
def test_a_dedupe_ttl_under_a_second_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, days: str
) -> None:
    # Redis keeps expiries in whole seconds here: 0 would make every /save a 503.
    monkeypatch.setenv("MEMORY_POOL_DEDUPE_TTL_DAYS", days)
    with pytest.raises(ValidationError, match=r"DEDUPE_TTL_DAYS .* at least one second"):
        Settings()
    monkeypatch.setenv("MEMORY_POOL_DEDUPE_TTL_DAYS", "0.0000116")  # 1.002 s
    assert Settings().dedupe_ttl_seconds == 1


def test_the_lease_outlasts_an_upsert() -> None:
    with pytest.raises(ValidationError, match=r"LEASE_SECONDS \(20\) must be more than twice"):
        Settings(MEMORY_POOL_LEASE_SECONDS=20, MEMORY_POOL_QDRANT_TIMEOUT=10)
    assert Settings(MEMORY_POOL_LEASE_SECONDS=21, MEMORY_POOL_QDRANT_TIMEOUT=10).lease_seconds == 21

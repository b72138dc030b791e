"""The settings of the door's limits: defaults, refusals, allowed hosts, and README names them."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from shared.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
LIMITS = {
    "MEMORY_POOL_MAX_BODY_BYTES": ("max_body_bytes", 8 * 1024 * 1024),
    "MEMORY_POOL_MAX_QUERY_CHARS": ("max_query_chars", 8000),
    "MEMORY_POOL_RECALL_CONCURRENCY": ("recall_concurrency", 4),
    "MEMORY_POOL_RECALL_QUEUE_SECONDS": ("recall_queue_seconds", 1.0),
    "MEMORY_POOL_AGENT_THREADS": ("agent_threads", 4),
    "MEMORY_POOL_ALLOWED_HOSTS": ("allowed_hosts", None),
}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LIMITS:
        monkeypatch.delenv(name, raising=False)


def test_defaults() -> None:
    settings = Settings()
    for field, default in LIMITS.values():
        assert getattr(settings, field) == default, field
    assert settings.allowed_host_names is None


def test_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_POOL_MAX_QUERY_CHARS", "500")
    monkeypatch.setenv("MEMORY_POOL_ALLOWED_HOSTS", " API, memory.example:3102 ,, ")
    settings = Settings()
    assert settings.max_query_chars == 500
    assert settings.allowed_host_names == frozenset({"api", "memory.example:3102"})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MEMORY_POOL_MAX_BODY_BYTES", "100"),
        ("MEMORY_POOL_MAX_QUERY_CHARS", "0"),
        ("MEMORY_POOL_RECALL_CONCURRENCY", "0"),
        ("MEMORY_POOL_RECALL_QUEUE_SECONDS", "-1"),
        ("MEMORY_POOL_AGENT_THREADS", "0"),
        ("MEMORY_POOL_AGENT_THREADS", "33"),  # 40 threads in all: a share must leave others some
    ],
)
def test_unusable_limits_are_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        Settings()


def test_readme_states_every_limit() -> None:
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("## Limits and refusals")[1]
    section = section.split("\n## ")[0]
    for name in [*LIMITS, "MEMORY_POOL_MAX_MESSAGES", "MEMORY_POOL_MAX_CHARS"]:
        assert name in section, name
    for rule in ("256 characters", "1970 to 9999", "U+FFFD", "`refusals`", "128 characters"):
        assert rule in section or rule.strip("`") in section, rule


# --- /v1/embeddings and CORS (README: "SillyTavern on the same pool") ---------------------------

PAGES = ("MEMORY_POOL_EMBEDDINGS_CONCURRENCY", "MEMORY_POOL_EMBEDDINGS_ANY_MODEL",
         "MEMORY_POOL_CORS_ORIGINS")  # fmt: skip


@pytest.fixture
def no_page_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PAGES:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("no_page_settings")
def test_embeddings_and_cors_defaults() -> None:
    settings = Settings()
    assert settings.embeddings_concurrency == 2
    assert settings.embeddings_any_model is True
    # SillyTavern's own address, both spellings
    assert settings.cors_origin_names == {"http://127.0.0.1:8000", "http://localhost:8000"}


@pytest.mark.usefixtures("no_page_settings")
def test_cors_origins_read_as_browsers_send_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_POOL_CORS_ORIGINS", " HTTP://192.168.1.20:8000/ ,, https://st.ex ")
    assert Settings().cors_origin_names == {"http://192.168.1.20:8000", "https://st.ex"}
    monkeypatch.setenv("MEMORY_POOL_CORS_ORIGINS", "")
    assert Settings().cors_origin_names == frozenset()  # no page at all


@pytest.mark.usefixtures("no_page_settings")
@pytest.mark.parametrize(
    ("written", "sent"),
    [
        # a browser's Origin never names the scheme's default port (the URL standard)
        ("https://st.example.com:443", "https://st.example.com"),
        ("http://192.168.1.20:80/", "http://192.168.1.20"),
        ("http://[::1]:80", "http://[::1]"),
        ("https://st.example.com:8443", "https://st.example.com:8443"),
        ("http://st.example.com:443", "http://st.example.com:443"),  # not http's default
        ("http://host:8080", "http://host:8080"),
        # nor a path: SillyTavern's address pasted as the browser shows it
        ("http://127.0.0.1:8000/index.html", "http://127.0.0.1:8000"),
        ("https://st.example.com/sillytavern/?x=1#top", "https://st.example.com"),
    ],
)
def test_cors_origins_are_the_origins_browsers_send(
    monkeypatch: pytest.MonkeyPatch, written: str, sent: str
) -> None:
    """Written as README says (scheme://host:port) or as the address bar shows SillyTavern,
    an origin is kept as the `Origin` header a browser sends for that page."""
    monkeypatch.setenv("MEMORY_POOL_CORS_ORIGINS", written)
    assert Settings().cors_origin_names == {sent}


@pytest.mark.usefixtures("no_page_settings")
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MEMORY_POOL_CORS_ORIGINS", "*"),
        ("MEMORY_POOL_CORS_ORIGINS", "http://*.example"),
        ("MEMORY_POOL_CORS_ORIGINS", "127.0.0.1:8000"),  # no scheme: never an Origin header
        ("MEMORY_POOL_CORS_ORIGINS", "http:///sillytavern"),  # no host
        ("MEMORY_POOL_CORS_ORIGINS", "ftp://127.0.0.1:8000"),
        ("MEMORY_POOL_EMBEDDINGS_CONCURRENCY", "0"),
        ("MEMORY_POOL_EMBEDDINGS_ANY_MODEL", "maybe"),
    ],
)
def test_unusable_page_settings_are_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError) as refused:
        Settings()
    if "CORS" in name:  # says which setting and what an origin is
        assert name in str(refused.value) and "scheme://host:port" in str(refused.value)


def test_readme_tells_sillytavern_users_what_to_set() -> None:
    section = (
        (ROOT / "README.md").read_text(encoding="utf-8").split("## SillyTavern on the same pool")
    )
    assert len(section) == 2, "README has one section 'SillyTavern on the same pool'"
    text = section[1].split("\n## ")[0]
    for needed in (
        *PAGES,
        "http://127.0.0.1:3102/qdrant",
        "http://127.0.0.1:3102/v1/embeddings",
        "Local/custom endpoint",
        # st-qdrant-memory's own labels (index.js 3.1.3), and what makes its collections agents'
        "Qdrant API Key",
        "Base Collection Name",
        "Embedding URL",
        "Embedding API Key",
        "Use Per-Character Collections",
        "collection: mem_",
        "Delete All Memories",
        "api-key",
        "QDRANT_URL",
    ):
        assert needed in text, needed

"""Service settings from the environment (pydantic-settings), built once at start."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

OPENAI_DEFAULT_MODEL = "text-embedding-3-large"
LOCAL_DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def _env(name: str) -> AliasChoices:
    return AliasChoices(name)


# The ports a browser leaves out of an `Origin` header (the URL standard's default ports).
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def browser_origin(written: str) -> str:
    """An allowed origin as a browser sends it in `Origin`: lower case, no path, query or
    trailing slash, and no port when it is the scheme's default (`https://st.example:443` is
    sent as `https://st.example`). Anything without a scheme is returned for the check."""
    scheme, sep, rest = written.strip().lower().partition("://")
    host = re.split(r"[/?#]", rest, maxsplit=1)[0]
    default = _DEFAULT_PORTS.get(scheme)
    if sep and default is not None:
        host = host.removesuffix(":" + default)
    return f"{scheme}{sep}{host}"


class Settings(BaseSettings):
    """Everything memory-pool reads from its environment. Never built at import time."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    # --- connections ---------------------------------------------------------------------
    redis_url: str | None = Field(None, validation_alias=_env("REDIS_URL"))
    redis_timeout_seconds: float = Field(
        5.0, gt=0, validation_alias=_env("MEMORY_POOL_REDIS_TIMEOUT")
    )
    qdrant_url: str | None = Field(None, validation_alias=_env("QDRANT_URL"))
    qdrant_api_key: str | None = Field(None, validation_alias=_env("QDRANT_API_KEY"))
    qdrant_timeout_seconds: float = Field(
        10.0, gt=0, validation_alias=_env("MEMORY_POOL_QDRANT_TIMEOUT")
    )

    # --- embeddings ------------------------------------------------------------------------
    embedding_provider: Literal["openai", "local"] = Field(
        "local", validation_alias=_env("EMBEDDING_PROVIDER")
    )
    embedding_base_url: str | None = Field(None, validation_alias=_env("EMBEDDING_BASE_URL"))
    openai_api_key: str | None = Field(None, validation_alias=_env("OPENAI_API_KEY"))
    embedding_model: str | None = Field(None, validation_alias=_env("EMBEDDING_MODEL"))
    embedding_dimensions: int | None = Field(
        None, gt=0, validation_alias=_env("EMBEDDING_DIMENSIONS")
    )
    embedding_model_path: Path | None = Field(None, validation_alias=_env("EMBEDDING_MODEL_PATH"))
    embedding_timeout_seconds: float = Field(
        30.0, gt=0, validation_alias=_env("MEMORY_POOL_EMBEDDING_TIMEOUT")
    )
    # Servers such as text-embeddings-inference accept far fewer inputs per request than OpenAI.
    embedding_batch_size: int = Field(
        256, ge=1, le=2048, validation_alias=_env("MEMORY_POOL_EMBEDDING_BATCH_SIZE")
    )

    # --- files -----------------------------------------------------------------------------
    config_path: Path | None = Field(None, validation_alias=_env("MEMORY_POOL_CONFIG"))
    data_dir: Path = Field(Path("data"), validation_alias=_env("MEMORY_POOL_DATA_DIR"))

    # --- /save -----------------------------------------------------------------------------
    default_source: str = Field(
        "discord", min_length=1, validation_alias=_env("MEMORY_POOL_DEFAULT_SOURCE")
    )
    max_messages_per_request: int = Field(
        500, ge=1, validation_alias=_env("MEMORY_POOL_MAX_MESSAGES")
    )
    max_chars_per_request: int = Field(
        1_000_000, ge=1, validation_alias=_env("MEMORY_POOL_MAX_CHARS")
    )
    dedupe_ttl_days: float = Field(30, gt=0, validation_alias=_env("MEMORY_POOL_DEDUPE_TTL_DAYS"))

    # --- every request ------------------------------------------------------------------------
    # Enforced while the body streams in (api/middleware.py): 413 before reading past it. Room for
    # MEMORY_POOL_MAX_CHARS of text even when every character is sent as a \uXXXX escape.
    max_body_bytes: int = Field(
        8 * 1024 * 1024, ge=1024, validation_alias=_env("MEMORY_POOL_MAX_BODY_BYTES")
    )
    # Host names a request may address (DNS rebinding): comma-separated, "*" for any. Unset:
    # the loopback names on a loopback connection (`memory-pool serve`'s default bind), any
    # host otherwise.
    allowed_hosts: str | None = Field(None, validation_alias=_env("MEMORY_POOL_ALLOWED_HOSTS"))

    # --- /retrieve --------------------------------------------------------------------------
    # Below the Discord plugin's 3.5 s budget, so a slow recall answers 503 before it gives up.
    recall_timeout_seconds: float = Field(
        3.0, gt=0, validation_alias=_env("MEMORY_POOL_RECALL_TIMEOUT")
    )
    max_query_chars: int = Field(8000, ge=1, validation_alias=_env("MEMORY_POOL_MAX_QUERY_CHARS"))
    # Query embeddings at once; a recall that cannot get a slot within the wait answers 503
    # instead of queueing behind slow ones (cached queries need no slot).
    recall_concurrency: int = Field(
        4, ge=1, validation_alias=_env("MEMORY_POOL_RECALL_CONCURRENCY")
    )
    recall_queue_seconds: float = Field(
        1.0, ge=0, validation_alias=_env("MEMORY_POOL_RECALL_QUEUE_SECONDS")
    )

    # Threads of the API's pool (Starlette's, 40) one agent may hold at once for each kind of
    # call: its /qdrant reads, its /qdrant writes, its recalls, its /agents/{bot} operations
    # (api/agent_threads.py); its other calls wait their turn in the event loop, so a burst of
    # one SillyTavern's upserts to a slow store leaves threads for every other agent's calls.
    agent_threads: int = Field(4, ge=1, le=32, validation_alias=_env("MEMORY_POOL_AGENT_THREADS"))

    # --- POST /v1/embeddings (st-qdrant-memory's "local" embedding provider) -----------------
    # Embeddings requests embedding at once, apart from /retrieve's slots; more wait up to
    # MEMORY_POOL_EMBEDDING_TIMEOUT, then answer 503.
    embeddings_concurrency: int = Field(
        2, ge=1, validation_alias=_env("MEMORY_POOL_EMBEDDINGS_CONCURRENCY")
    )
    # Whether a request naming another model is served by EMBEDDING_MODEL (true) or refused
    # (404). st-qdrant-memory's "local" provider sends the model of its hidden OpenAI menu
    # (text-embedding-3-large unless changed) and has no field to change it.
    embeddings_any_model: bool = Field(
        True, validation_alias=_env("MEMORY_POOL_EMBEDDINGS_ANY_MODEL")
    )
    # Browser origins (scheme://host:port) whose pages may call /v1/... and /qdrant/... (CORS),
    # comma-separated; SillyTavern's own by default. The rest of the API answers no page.
    cors_origins: str = Field(
        "http://127.0.0.1:8000,http://localhost:8000",
        validation_alias=_env("MEMORY_POOL_CORS_ORIGINS"),
    )

    # --- workers ---------------------------------------------------------------------------
    # A worker's lease on a conversation; the task's hard time limit stays below it, so a
    # stalled worker is killed before another one can take the conversation over.
    lease_seconds: float = Field(60, ge=5, validation_alias=_env("MEMORY_POOL_LEASE_SECONDS"))
    flush_batch_conversations: int = Field(
        32, ge=1, validation_alias=_env("MEMORY_POOL_FLUSH_BATCH")
    )
    scheduler_interval_seconds: float = Field(
        0.25, gt=0, validation_alias=_env("MEMORY_POOL_SCHEDULER_INTERVAL")
    )

    # How often the scheduler sends the BM25 backfill task (a few seconds of work each).
    backfill_interval_seconds: float = Field(
        5.0, gt=0, validation_alias=_env("MEMORY_POOL_BACKFILL_INTERVAL")
    )

    # --- observability (README, "Metrics, logs and monitoring") ---------------------------------
    log_format: Literal["text", "json"] = Field(
        "text", validation_alias=_env("MEMORY_POOL_LOG_FORMAT")
    )
    # Off: no /metrics and no counting on the API (BENCHMARKS.md measures the difference).
    metrics_enabled: bool = Field(True, validation_alias=_env("MEMORY_POOL_METRICS"))
    # Unlisted agents and sources named in metric labels, per process; the rest are "other",
    # so hostile names cannot grow the series without bound.
    metrics_max_label_values: int = Field(
        20, ge=0, le=1000, validation_alias=_env("MEMORY_POOL_METRICS_MAX_LABELS")
    )

    @property
    def task_time_limit(self) -> float:
        return self.lease_seconds * 0.8

    @property
    def task_soft_time_limit(self) -> float:
        return self.lease_seconds * 0.7

    @model_validator(mode="after")
    def _lease_outlasts_an_upsert(self) -> Settings:
        # A flush renews its lease right before it upserts; the upsert (at most a couple of
        # Qdrant requests) must end inside the lease, or a late write could land after another
        # worker has taken the conversation over.
        if self.lease_seconds <= 2 * self.qdrant_timeout_seconds:
            raise ValueError(
                f"MEMORY_POOL_LEASE_SECONDS ({self.lease_seconds:g}) must be more than twice "
                f"MEMORY_POOL_QDRANT_TIMEOUT ({self.qdrant_timeout_seconds:g})"
            )
        return self

    @model_validator(mode="after")
    def _dedupe_lasts_a_second(self) -> Settings:
        # Dedupe markers expire in whole seconds; 0 would make every /save fail in Redis.
        if self.dedupe_ttl_seconds < 1:
            raise ValueError(
                f"MEMORY_POOL_DEDUPE_TTL_DAYS ({self.dedupe_ttl_days:g}) must be at least one "
                f"second ({1 / 86400:.7f} days)"
            )
        return self

    @model_validator(mode="after")
    def _openai_needs_no_key_but_a_model(self) -> Settings:
        # An OPENAI_API_KEY alone never switches the provider: only EMBEDDING_PROVIDER does.
        if self.embedding_model is None:
            self.embedding_model = (
                OPENAI_DEFAULT_MODEL if self.embedding_provider == "openai" else LOCAL_DEFAULT_MODEL
            )
        return self

    @property
    def allowed_host_names(self) -> frozenset[str] | None:
        """The allowed hosts, lower-cased ("*" among them allows any); None when unset."""
        if self.allowed_hosts is None:
            return None
        return frozenset(h.strip().lower() for h in self.allowed_hosts.split(",") if h.strip())

    @property
    def cors_origin_names(self) -> frozenset[str]:
        """The allowed origins as browsers send them (browser_origin)."""
        return frozenset(browser_origin(o) for o in self.cors_origins.split(",") if o.strip())

    @model_validator(mode="after")
    def _cors_origins_are_origins(self) -> Settings:
        # A wildcard would let any web page use the embeddings and the memories of a keyless pool.
        for origin in self.cors_origin_names:
            scheme, _, host = origin.partition("://")
            if scheme not in _DEFAULT_PORTS or not host or "*" in origin:
                raise ValueError(
                    f"MEMORY_POOL_CORS_ORIGINS: {origin!r} is not an origin; list each one as "
                    "scheme://host:port, such as http://127.0.0.1:8000 (no wildcards)"
                )
        return self

    @property
    def dedupe_ttl_seconds(self) -> int:
        return int(self.dedupe_ttl_days * 86400)

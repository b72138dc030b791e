"""Embedding I/O: an OpenAI-compatible API or a local fastembed model behind one interface."""

from __future__ import annotations

import email.utils
import hashlib
import json
import logging
import math
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import openai

from shared.embedding.turns import ModelTurns
from shared.errors import InputRejected, UpstreamUnavailable
from shared.settings import LOCAL_DEFAULT_MODEL, OPENAI_DEFAULT_MODEL, Settings

if TYPE_CHECKING:
    from fastembed import TextEmbedding

log = logging.getLogger(__name__)

# OpenAI's limit is 8192 tokens an input and 300k a request. Without a tokenizer we count
# characters: CJK text can take about one token a character, so characters bound tokens.
MAX_INPUT_CHARS = 8000
MAX_REQUEST_CHARS = 300_000
# A health check must answer quickly even when the embedding timeout is generous.
PING_TIMEOUT_SECONDS = 5.0
PROBE_TEXT = "dimension probe"
LOCAL_BATCH_SIZE = 32

# Statuses that mean "this request's content was refused": bisect to find the culprit inputs.
# 413/422 are how OpenAI-compatible servers (text-embeddings-inference, vLLM) say the same.
_INPUT_STATUSES = frozenset({400, 413, 422})
# Statuses that mean the settings are wrong: retrying later is right, dead-lettering never is.
_CONFIG_STATUSES = frozenset({401, 403, 404})
_CONFIG_HINT = "check OPENAI_API_KEY, EMBEDDING_BASE_URL, EMBEDDING_MODEL and EMBEDDING_DIMENSIONS"

Vector = list[float]
Embedded = Vector | InputRejected


class Embedder(Protocol):
    """What the workers (chunk batches) and the API (queries) need from an embedding model."""

    model: str  # recorded with each collection, so a model change is detected

    def dimensions(self) -> int:
        """Vector size, found once and cached."""
        ...

    def embed(self, texts: Sequence[str]) -> list[Embedded]:
        """One vector per text in input order, or InputRejected where the input was refused."""
        ...

    def ping(self) -> bool:
        """Whether embedding works right now; cheap and never raises."""
        ...

    def close(self) -> None:
        """Release connections or the loaded model."""
        ...


def make_embedder(settings: Settings) -> Embedder:
    """The embedder chosen by `settings.embedding_provider`; nothing connects or loads yet."""
    if settings.embedding_provider == "openai":
        return OpenAIEmbedder(settings)
    return LocalEmbedder(settings)


def embed_after_others(embedder: Embedder, texts: Sequence[str]) -> list[Embedded]:
    """`embedder.embed` for a caller that can wait (POST /v1/embeddings): the local model
    serves every other caller waiting for it first (shared/embedding/turns.py); a provider
    over HTTP has no such queue here."""
    if isinstance(embedder, LocalEmbedder):
        return embedder.embed(texts, after_others=True)
    return embedder.embed(texts)


# --------------------------------------------------------------------------- pure rules


def truncate_for_embedding(text: str, limit: int = MAX_INPUT_CHARS) -> str:
    """The part of `text` sent to the model; the stored chunk text is never changed."""
    return text if len(text) <= limit else text[:limit]


def plan_batches(
    lengths: Sequence[int], max_inputs: int, max_chars: int = MAX_REQUEST_CHARS
) -> list[list[int]]:
    """Split positions 0..n-1, in order, into requests within both the count and size limits."""
    batches: list[list[int]] = []
    current: list[int] = []
    chars = 0
    for index, length in enumerate(lengths):
        if current and (len(current) >= max_inputs or chars + length > max_chars):
            batches.append(current)
            current, chars = [], 0
        current.append(index)
        chars += length
    if current:
        batches.append(current)
    return batches


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (seconds or an HTTP date).

    `headers` must match names case-insensitively (httpx headers do) or use lower case.
    """
    millis = _finite_float(headers.get("retry-after-ms"))
    if millis is not None:
        return max(millis / 1000, 0.0)
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _finite_float(value)
    if seconds is None:
        seconds = _seconds_until(value, time.time() if now is None else now)
    return None if seconds is None else max(seconds, 0.0)


def _finite_float(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _seconds_until(http_date: str, now: float) -> float | None:
    try:
        moment = email.utils.parsedate_to_datetime(http_date)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:  # "-0000" parses naive; HTTP dates are always GMT
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp() - now


# --------------------------------------------------------------------------- openai


class _RequestRejected(Exception):
    """The provider refused a request's content for good; it does not say which input."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _provider_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping) and isinstance(body.get("message"), str):
        return str(body["message"])
    return exc.message


def _is_input_problem(exc: openai.APIStatusError) -> bool:
    # A 400 naming another parameter ("model", "dimensions") is a setting, not an input.
    return exc.status_code in _INPUT_STATUSES and exc.param in (None, "input")


def _translate(exc: openai.APIStatusError) -> Exception:
    """The error for a provider refusal: an input problem to bisect, or a retryable outage."""
    message = _provider_message(exc)
    if _is_input_problem(exc):
        return _RequestRejected(message)
    retry_after = retry_after_seconds(exc.response.headers)
    if exc.status_code in _CONFIG_STATUSES or exc.status_code in _INPUT_STATUSES:
        return UpstreamUnavailable(
            f"embedding provider refused the configuration (HTTP {exc.status_code}): "
            f"{message}; {_CONFIG_HINT}",
            retry_after=retry_after,
        )
    return UpstreamUnavailable(
        f"embedding provider unavailable (HTTP {exc.status_code}): {message}",
        retry_after=retry_after,
    )


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible HTTP API; retrying is the caller's job."""

    def __init__(self, settings: Settings) -> None:
        self.model: str = settings.embedding_model or OPENAI_DEFAULT_MODEL
        self._extra: dict[str, Any] = (
            {}
            if settings.embedding_dimensions is None
            else {"dimensions": settings.embedding_dimensions}
        )
        self._batch_size = settings.embedding_batch_size
        self._timeout = settings.embedding_timeout_seconds
        self._dims: int | None = None
        # max_retries=0: a worker releases its lease and reschedules instead of sleeping here.
        self._client = openai.OpenAI(
            base_url=settings.embedding_base_url,
            api_key=settings.openai_api_key or "unused",
            timeout=settings.embedding_timeout_seconds,
            max_retries=0,
        )

    def dimensions(self) -> int:
        if self._dims is None:  # any successful response also records the size
            self._dims = len(self._request([PROBE_TEXT])[0])
        return self._dims

    def embed(self, texts: Sequence[str]) -> list[Embedded]:
        # OpenAI refuses empty strings; answering them here saves a bisection.
        results: dict[int, Embedded] = {
            i: InputRejected("empty input: nothing to embed")
            for i, text in enumerate(texts)
            if not text
        }
        sendable = [i for i, text in enumerate(texts) if text]
        prepared = [self._prepare(i, texts[i]) for i in sendable]
        for batch in plan_batches([len(t) for t in prepared], self._batch_size):
            vectors = self._embed_bisecting([prepared[j] for j in batch])
            for j, vector in zip(batch, vectors, strict=True):
                results[sendable[j]] = vector
        return [results[i] for i in range(len(texts))]

    def ping(self) -> bool:
        try:
            self._request([PROBE_TEXT], timeout=min(self._timeout, PING_TIMEOUT_SECONDS))
        except Exception as exc:  # the contract is "never raises": health reports, not fails
            log.info("embedding provider ping failed: %s", exc)
            return False
        return True

    def close(self) -> None:
        self._client.close()

    @staticmethod
    def _prepare(index: int, text: str) -> str:
        sent = truncate_for_embedding(text)
        if len(sent) < len(text):
            log.warning(
                "input %d has %d characters; embedding only its first %d (stored text unchanged)",
                index,
                len(text),
                len(sent),
            )
        return sent

    def _embed_bisecting(self, texts: list[str]) -> list[Embedded]:
        """Embed `texts`; on a content refusal split in halves until single inputs remain."""
        try:
            return list(self._request(texts))
        except _RequestRejected as exc:
            if len(texts) == 1:
                # Its reason may quote the input (message text): only at DEBUG.
                log.warning("embedding provider rejected an input of %d characters", len(texts[0]))
                log.debug("embedding provider's reason: %s", exc.reason)
                return [InputRejected(exc.reason)]
            middle = len(texts) // 2
            return self._embed_bisecting(texts[:middle]) + self._embed_bisecting(texts[middle:])

    def _request(self, texts: list[str], timeout: float | None = None) -> list[Vector]:
        options: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        try:
            response = self._client.embeddings.create(
                model=self.model, input=texts, **self._extra, **options
            )
        except openai.APIStatusError as exc:
            raise _translate(exc) from exc
        except openai.APIError as exc:  # timeouts, refused connections, unreadable answers
            raise UpstreamUnavailable(f"embedding provider unreachable: {exc.message}") from exc
        return self._vectors(response.data, len(texts))

    def _vectors(self, data: Sequence[Any], expected: int) -> list[Vector]:
        vectors = [list(item.embedding) for item in sorted(data, key=lambda item: item.index)]
        sizes = {len(vector) for vector in vectors}
        if len(vectors) != expected or len(sizes) != 1:
            raise UpstreamUnavailable(
                f"embedding provider returned {len(vectors)} vectors of sizes {sorted(sizes)} "
                f"for {expected} inputs"
            )
        self._dims = sizes.pop()
        return vectors


# --------------------------------------------------------------------------- local


_custom_models: set[str] = set()
_custom_models_lock = threading.Lock()


def _model_file(folder: Path) -> str:
    """The folder's ONNX file, relative to it: model.onnx first, else the only one there."""
    found = sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*.onnx"))
    for preferred in ("model.onnx", "onnx/model.onnx"):
        if preferred in found:
            return preferred
    if len(found) != 1:
        raise ValueError(f"expected one .onnx file in {folder}, found {found or 'none'}")
    return found[0]


def register_model_folder(folder: Path) -> str:
    """Register an offline sentence-transformers ONNX folder with fastembed; returns its name.

    Assumes mean pooling and L2 normalisation, as sentence-transformers' MiniLM/MPNet models
    use. The name carries a hash of the path so two folders with one name never collide.
    """
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    folder = folder.resolve()
    digest = hashlib.sha256(str(folder).encode()).hexdigest()[:8]
    name = f"local/{folder.name}-{digest}"
    with _custom_models_lock:  # fastembed raises when one name is registered twice
        if name not in _custom_models:
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            TextEmbedding.add_custom_model(
                model=name,
                pooling=PoolingType.MEAN,
                normalization=True,
                sources=ModelSource(hf=name),
                dim=int(config["hidden_size"]),
                model_file=_model_file(folder),
            )
            _custom_models.add(name)
    return name


class LocalEmbedder:
    """Embeddings from fastembed in this process; the model loads on first use and stays."""

    def __init__(self, settings: Settings) -> None:
        self.model: str = settings.embedding_model or LOCAL_DEFAULT_MODEL
        self._folder = settings.embedding_model_path
        # Not EMBEDDING_BATCH_SIZE, which sizes HTTP requests: an ONNX batch of 256 chunks took a
        # worker from 170 MiB to over 1.3 GiB (bench/memory.py), and 32 keeps both cores busy.
        self._batch_size = LOCAL_BATCH_SIZE
        # One turn at a time for load and embed: loading is not thread-safe, and ONNX already
        # uses every core for one batch, so serialising embeds costs little.
        self._turns = ModelTurns()
        self._engine: TextEmbedding | None = None
        self._dims: int | None = None

    def dimensions(self) -> int:
        if self._dims is None:
            self._dims = len(self._embed_all([PROBE_TEXT])[0])
        return self._dims

    def embed(self, texts: Sequence[str], *, after_others: bool = False) -> list[Embedded]:
        return list(self._embed_all(texts, after_others=after_others))

    def ping(self) -> bool:
        try:
            with self._turns.turn():
                self._load()
        except UpstreamUnavailable as exc:
            log.info("local embedding model unavailable: %s", exc)
            return False
        return True

    def close(self) -> None:
        with self._turns.turn():
            self._engine = None

    def _embed_all(self, texts: Sequence[str], *, after_others: bool = False) -> list[Vector]:
        if not texts:
            return []
        with self._turns.turn(after_others=after_others):
            engine = self._load()
            arrays = list(engine.embed(list(texts), batch_size=self._batch_size))
        return [array.tolist() for array in arrays]  # plain floats, not numpy scalars

    def _load(self) -> TextEmbedding:
        """The loaded model; call during a turn."""
        if self._engine is not None:
            return self._engine
        try:
            from fastembed import TextEmbedding

            if self._folder is None:
                engine = TextEmbedding(self.model)
            else:
                name = register_model_folder(self._folder)
                engine = TextEmbedding(name, specific_model_path=str(self._folder))
        except Exception as exc:  # missing files, failed download, bad ONNX: all "not now"
            source = self._folder or self.model
            raise UpstreamUnavailable(
                f"local embedding model {source} failed to load: {exc}"
            ) from exc
        self._engine = engine
        return engine

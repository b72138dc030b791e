"""OpenAI-compatible embeddings test server: deterministic vectors, API limits, faults, log."""

import argparse
import base64
import contextlib
import functools
import hashlib
import json
import logging
import math
import re
import signal
import socket
import socketserver
import sys
import threading
import time
import uuid
from array import array
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType, TracebackType
from typing import Any, Self

log = logging.getLogger(__name__)

DEFAULT_MODEL = "text-embedding-3-small"
DEFAULT_DIMS = 64
# OpenAI's documented limits for every embedding model.
MAX_INPUTS_PER_REQUEST = 2048
MAX_INPUT_TOKENS = 8192
MAX_TOKENS_PER_REQUEST = 300_000
# Not an OpenAI limit: stops a typo from allocating gigabytes of floats.
MAX_DIMENSIONS = 16_384

_API_REFERENCE = "Please check the API reference: https://platform.openai.com/docs/api-reference."
_KEYS_PAGE = "https://platform.openai.com/account/api-keys"
_WORD_RE = re.compile(r"\w+")
# Trigrams let inflections ("running"/"run") overlap a little without drowning out whole words.
_TRIGRAM_WEIGHT = 0.25


# --------------------------------------------------------------------------- vectors


@functools.lru_cache(maxsize=1 << 16)
def _hash_feature(feature: str, dims: int) -> tuple[int, float]:
    """Map a feature to (dimension, ±1) with blake2b: unlike hash(), stable across processes."""
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    index = int.from_bytes(digest[:7], "little") % dims
    sign = 1.0 if digest[7] & 1 else -1.0
    return index, sign


def _features(text: str) -> list[tuple[str, float]]:
    """Weighted features: every lowercase word, plus its boundary-padded character trigrams."""
    features: list[tuple[str, float]] = []
    for word in _WORD_RE.findall(text.lower()):
        features.append(("w:" + word, 1.0))
        padded = f"#{word}#"
        features.extend(("c:" + padded[i : i + 3], _TRIGRAM_WEIGHT) for i in range(len(padded) - 2))
    return features


def embed_text(text: str, dims: int) -> list[float]:
    """Deterministic unit vector for `text`: an L2-normalised, signed, hashed bag of words.

    Texts sharing words get a high cosine, unrelated texts a cosine near 0 (up to hash
    collisions, which shrink as `dims` grows). Text without any word maps to the fixed unit
    vector e0 so cosine stays defined. Values are rounded to float32, so the float and base64
    encodings of the server return exactly this list.
    """
    if dims < 1:
        raise ValueError(f"dims must be >= 1, got {dims}")
    vector = [0.0] * dims
    for feature, weight in _features(text):
        index, sign = _hash_feature(feature, dims)
        vector[index] += sign * weight
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0.0:
        vector[0], norm = 1.0, 1.0
    return array("f", (x / norm for x in vector)).tolist()


def count_tokens(text: str) -> int:
    """Approximate token count: max(whitespace-separated words, ceil(len(text) / 4)).

    Real tokenizers average about 4 characters per English token; taking the larger of the two
    estimates makes the limit bite both on long prose and on long runs of short words.
    """
    return max(len(text.split()), math.ceil(len(text) / 4))


def _encode_vector(vector: list[float], encoding_format: str) -> list[float] | str:
    """Float list as-is, or base64 of little-endian float32 bytes (the openai client default)."""
    if encoding_format == "float":
        return vector
    packed = array("f", vector)
    if sys.byteorder == "big":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


# --------------------------------------------------------------------------- errors


class _ApiError(Exception):
    """An error answered in OpenAI's shape: {"error": {"message", "type", "param", "code"}}."""

    def __init__(
        self,
        status: int,
        message: str,
        error_type: str = "invalid_request_error",
        *,
        code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_type = error_type
        self.code = code
        self.param = param
        self.headers = dict(headers or {})

    def reply(self) -> "_Reply":
        error = {
            "message": self.message,
            "type": self.error_type,
            "param": self.param,
            "code": self.code,
        }
        return _Reply(self.status, {"error": error}, self.headers)


def _invalid_input(detail: str = "") -> _ApiError:
    # OpenAI answers every malformed `input` with this same vague message.
    suffix = f" ({detail})" if detail else ""
    return _ApiError(400, f"'$.input' is invalid. {_API_REFERENCE}{suffix}")


def _context_length_error(tokens: int, limit: int) -> _ApiError:
    return _ApiError(
        400,
        f"This model's maximum context length is {limit} tokens, however you requested "
        f"{tokens} tokens ({tokens} in your prompt; 0 for the completion). "
        "Please reduce your prompt; or completion length.",
    )


def _missing_key_error() -> _ApiError:
    return _ApiError(
        401,
        "You didn't provide an API key. You need to provide your API key in an Authorization "
        "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY). "
        f"You can obtain an API key from {_KEYS_PAGE}.",
    )


def _wrong_key_error(key: str) -> _ApiError:
    masked = key[:3] + "*" * max(len(key) - 7, 0) + key[-4:] if len(key) > 7 else "***"
    return _ApiError(
        401,
        f"Incorrect API key provided: {masked}. You can find your API key at {_KEYS_PAGE}.",
        code="invalid_api_key",
    )


def _server_error(status: int, headers: Mapping[str, str] | None = None) -> _ApiError:
    return _ApiError(
        status,
        "The server had an error while processing your request. Sorry about that!",
        "server_error",
        headers=headers,
    )


def _format_seconds(seconds: float) -> str:
    # Integral delays go out as "2" (RFC 9110 form); fractions as "0.5", which openai accepts.
    return str(int(seconds)) if float(seconds).is_integer() else f"{seconds:g}"


def _fault_error(status: int, retry_after: float | None, model: str | None) -> _ApiError:
    """The error body OpenAI sends for `status`: rate limit, server error or client error."""
    headers = {"Retry-After": _format_seconds(retry_after)} if retry_after is not None else {}
    if status == 429:
        wait = f"{retry_after:g}s" if retry_after is not None else "1s"
        message = (
            f"Rate limit reached for {model or DEFAULT_MODEL} on requests per min (RPM): "
            f"Limit 3000, Used 3000, Requested 1. Please try again in {wait}."
        )
        return _ApiError(429, message, "requests", code="rate_limit_exceeded", headers=headers)
    if status >= 500:
        return _server_error(status, headers)
    return _ApiError(status, f"Injected client error (HTTP {status}).", headers=headers)


# --------------------------------------------------------------------------- request model


@dataclass(frozen=True)
class RequestRecord:
    """One /v1/embeddings call as the server saw it; `dimensions` is None when not requested."""

    time: float
    model: str | None
    n_inputs: int
    dimensions: int | None
    encoding_format: str
    status: int


@dataclass(frozen=True)
class _Reply:
    status: int
    payload: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Input:
    text: str
    tokens: int


@dataclass(frozen=True)
class _Limits:
    max_inputs: int
    max_input_tokens: int
    max_request_tokens: int


@dataclass(frozen=True)
class _EmbeddingRequest:
    model: str
    inputs: list[_Input]
    dims: int
    encoding_format: str


def _is_token_array(value: object) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(t, int) and not isinstance(t, bool) for t in value)
    )


def _parse_one_input(item: object) -> _Input:
    if isinstance(item, str) and item:
        return _Input(item, count_tokens(item))
    if _is_token_array(item):
        # A token array is embedded as the text of its ids; its token count is exact.
        tokens: list[int] = item  # type: ignore[assignment]
        return _Input(" ".join(map(str, tokens)), len(tokens))
    raise _invalid_input()


def _parse_inputs(raw: object, max_inputs: int) -> list[_Input]:
    """`input` as str | list[str] | list[int] | list[list[int]], validated like OpenAI does."""
    if isinstance(raw, str) or _is_token_array(raw):
        items: list[object] = [raw]
    elif isinstance(raw, list) and raw:
        items = raw
    else:
        raise _invalid_input()
    if len(items) > max_inputs:
        raise _invalid_input(f"got {len(items)} inputs, the maximum is {max_inputs}")
    if len({type(item) for item in items}) > 1:
        raise _invalid_input("strings and token arrays cannot be mixed")
    return [_parse_one_input(item) for item in items]


def _check_token_limits(inputs: list[_Input], limits: _Limits) -> None:
    for item in inputs:
        if item.tokens > limits.max_input_tokens:
            raise _context_length_error(item.tokens, limits.max_input_tokens)
    total = sum(item.tokens for item in inputs)
    if total > limits.max_request_tokens:
        raise _ApiError(
            400,
            f"Requested {total} tokens, max {limits.max_request_tokens} tokens per request",
            "max_tokens_per_request",
            code="max_tokens_per_request",
        )


def _parse_dimensions(raw: object, default: int) -> int:
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= MAX_DIMENSIONS:
        raise _ApiError(
            400,
            f"Invalid value for 'dimensions' = {raw!r}. Must be between 1 and {MAX_DIMENSIONS}.",
            param="dimensions",
        )
    return raw


def _parse_encoding_format(raw: object) -> str:
    if raw is None:
        return "float"  # the API's own default; the openai client always sends base64
    if raw not in ("float", "base64"):
        raise _ApiError(
            400,
            f"{raw!r} is not one of ['float', 'base64'] - 'encoding_format'",
            param="encoding_format",
        )
    return str(raw)


def _parse_request(body: dict[str, Any], default_dims: int, limits: _Limits) -> _EmbeddingRequest:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _ApiError(400, "you must provide a model parameter")
    inputs = _parse_inputs(body.get("input"), limits.max_inputs)
    _check_token_limits(inputs, limits)
    return _EmbeddingRequest(
        model=model,
        inputs=inputs,
        dims=_parse_dimensions(body.get("dimensions"), default_dims),
        encoding_format=_parse_encoding_format(body.get("encoding_format")),
    )


def _embedding_payload(request: _EmbeddingRequest) -> dict[str, Any]:
    data = [
        {
            "object": "embedding",
            "index": i,
            "embedding": _encode_vector(
                embed_text(item.text, request.dims), request.encoding_format
            ),
        }
        for i, item in enumerate(request.inputs)
    ]
    tokens = sum(item.tokens for item in request.inputs)
    return {
        "object": "list",
        "data": data,
        "model": request.model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _load_json(raw: bytes) -> dict[str, Any] | None:
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return body if isinstance(body, dict) else None


def _count_raw_inputs(raw: object) -> int:
    """Best-effort input count for the log, even when the request is invalid."""
    if isinstance(raw, str) or _is_token_array(raw):
        return 1
    return len(raw) if isinstance(raw, list) else 0


def _record_for(started: float, body: dict[str, Any] | None, status: int) -> RequestRecord:
    body = body or {}
    model = body.get("model")
    dims = body.get("dimensions")
    fmt = body.get("encoding_format")
    return RequestRecord(
        time=started,
        model=model if isinstance(model, str) else None,
        n_inputs=_count_raw_inputs(body.get("input")),
        dimensions=dims if isinstance(dims, int) and not isinstance(dims, bool) else None,
        encoding_format=fmt if isinstance(fmt, str) else "float",
        status=status,
    )


# --------------------------------------------------------------------------- faults


class _Faults:
    """Queued one-shot failures and hangs plus persistent input markers, shared by handlers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures: deque[tuple[int, float | None]] = deque()
        self._hangs: deque[float] = deque()
        self._markers: list[str] = []

    def add_failures(self, status: int, times: int, retry_after: float | None) -> None:
        with self._lock:
            self._failures.extend([(status, retry_after)] * times)

    def add_hangs(self, seconds: float, times: int) -> None:
        with self._lock:
            self._hangs.extend([seconds] * times)

    def add_marker(self, marker: str) -> None:
        with self._lock:
            self._markers.append(marker)

    def clear(self) -> None:
        with self._lock:
            self._failures.clear()
            self._hangs.clear()
            self._markers.clear()

    def pop_hang(self) -> float | None:
        with self._lock:
            return self._hangs.popleft() if self._hangs else None

    def pop_failure(self) -> tuple[int, float | None] | None:
        with self._lock:
            return self._failures.popleft() if self._failures else None

    def find_marker(self, inputs: list[_Input]) -> str | None:
        with self._lock:
            markers = list(self._markers)
        return next((m for m in markers for item in inputs if m in item.text), None)


# --------------------------------------------------------------------------- HTTP plumbing


class _HttpServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that tracks open connections so stop() can cut keep-alive clients."""

    allow_reuse_address = True  # rebind the same port right after stop() despite TIME_WAIT
    allow_reuse_port = False  # a second server on a busy port must fail, not share it
    daemon_threads = True

    def __init__(self, address: tuple[str, int], owner: "EmbeddingServer") -> None:
        self.owner = owner
        self.stopping = threading.Event()  # wakes hung handlers when the server stops
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls getfqdn(), a reverse DNS lookup that can stall startup.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Unblock handler threads idling on keep-alive sockets so server_close() can join."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):  # the peer may have closed it already
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up (timeouts, outages) are expected in tests; only print real bugs.
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the real API; the openai client pools
    server_version = "embedding-test-server"
    sys_version = ""
    server: _HttpServer

    def do_GET(self) -> None:
        self._respond(
            self.server.owner.dispatch("GET", self.path, self.headers, b"", self.server.stopping)
        )

    def do_POST(self) -> None:
        body = self._read_body()
        self._respond(
            self.server.owner.dispatch("POST", self.path, self.headers, body, self.server.stopping)
        )

    def _read_body(self) -> bytes:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        return self.rfile.read(length) if length > 0 else b""

    def _respond(self, reply: _Reply) -> None:
        data = json.dumps(reply.payload).encode("utf-8")
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", f"req_{uuid.uuid4().hex}")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging: tests assert on `EmbeddingServer.requests` instead."""


# --------------------------------------------------------------------------- public server


class EmbeddingServer:
    """OpenAI-compatible embeddings server on 127.0.0.1, served from a daemon thread.

    `url` is the base_url for `openai.OpenAI`. Any model name is accepted on /v1/embeddings;
    `models` is only what GET /v1/models lists. Faults apply to /v1/embeddings only, after the
    API-key check, in this order: hang, queued failure, validation, rejected markers.
    """

    def __init__(
        self,
        dims: int = DEFAULT_DIMS,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        models: Sequence[str] = (DEFAULT_MODEL,),
        max_input_tokens: int = MAX_INPUT_TOKENS,
        max_inputs_per_request: int = MAX_INPUTS_PER_REQUEST,
        max_tokens_per_request: int = MAX_TOKENS_PER_REQUEST,
    ) -> None:
        if not 1 <= dims <= MAX_DIMENSIONS:
            raise ValueError(f"dims must be between 1 and {MAX_DIMENSIONS}, got {dims}")
        self.dims = dims
        self.host = host
        self.api_key = api_key
        self.models = tuple(models)
        self.limits = _Limits(max_inputs_per_request, max_input_tokens, max_tokens_per_request)
        self.requests: list[RequestRecord] = []
        self._port = port
        self._faults = _Faults()
        self._log_lock = threading.Lock()
        self._lifecycle_lock = threading.Lock()
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    @property
    def port(self) -> int:
        """Bound port; after the first start() it stays fixed so restarts reuse it."""
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self._port}/v1"

    @property
    def running(self) -> bool:
        return self._httpd is not None

    def start(self) -> Self:
        with self._lifecycle_lock:
            if self._httpd is not None:
                return self
            httpd = _HttpServer((self.host, self._port), self)
            self._port = httpd.server_address[1]
            # A short poll interval keeps stop() (and so simulated outages) fast.
            thread = threading.Thread(
                target=httpd.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"embedding-server-{self._port}",
                daemon=True,
            )
            thread.start()
            self._httpd, self._thread = httpd, thread
        return self

    def stop(self) -> None:
        with self._lifecycle_lock:
            httpd, thread = self._httpd, self._thread
            self._httpd, self._thread = None, None
            if httpd is None or thread is None:
                return
            httpd.stopping.set()
            httpd.shutdown()  # no new connections are accepted after this returns
            httpd.close_connections()
            httpd.server_close()  # joins handler threads, so no request outlives stop()
            thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- fault injection

    def fail_next(self, status: int, times: int = 1, retry_after: float | None = None) -> None:
        """Answer the next `times` embedding requests with `status` and an OpenAI error body."""
        if not 400 <= status <= 599:
            raise ValueError(f"status must be a 4xx or 5xx code, got {status}")
        if times < 1:
            raise ValueError(f"times must be >= 1, got {times}")
        self._faults.add_failures(status, times, retry_after)

    def hang_next(self, seconds: float, times: int = 1) -> None:
        """Delay the next `times` embedding requests by `seconds` (cut short by stop())."""
        if seconds < 0 or times < 1:
            raise ValueError("seconds must be >= 0 and times >= 1")
        self._faults.add_hangs(seconds, times)

    def reject_inputs_containing(self, marker: str) -> None:
        """Fail with 400 every request that has an input containing `marker` (until cleared)."""
        if not marker:
            raise ValueError("marker must not be empty")
        self._faults.add_marker(marker)

    def clear_faults(self) -> None:
        self._faults.clear()

    def reset_log(self) -> None:
        with self._log_lock:
            self.requests.clear()

    # -- request handling (called from handler threads)

    def dispatch(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        stopping: threading.Event,
    ) -> _Reply:
        route = path.split("?", 1)[0].rstrip("/")
        try:
            if method == "POST" and route == "/v1/embeddings":
                return self._serve_embeddings(headers, body, stopping)
            if method == "GET" and (route == "/v1/models" or route.startswith("/v1/models/")):
                self._check_auth(headers)
                return self._serve_models(route)
            raise _ApiError(404, f"Invalid URL ({method} {path})")
        except _ApiError as exc:
            return exc.reply()

    def _serve_embeddings(
        self, headers: Mapping[str, str], raw: bytes, stopping: threading.Event
    ) -> _Reply:
        started = time.time()
        body = _load_json(raw)
        try:
            reply = self._embed(headers, body, stopping)
        except _ApiError as exc:
            reply = exc.reply()
        except Exception:
            log.exception("embedding test server failed")
            reply = _server_error(500).reply()
        with self._log_lock:
            self.requests.append(_record_for(started, body, reply.status))
        return reply

    def _embed(
        self, headers: Mapping[str, str], body: dict[str, Any] | None, stopping: threading.Event
    ) -> _Reply:
        self._check_auth(headers)
        hang = self._faults.pop_hang()
        if hang:
            stopping.wait(hang)
        failure = self._faults.pop_failure()
        if failure is not None:
            model = body.get("model") if body else None
            raise _fault_error(failure[0], failure[1], model if isinstance(model, str) else None)
        if body is None:
            raise _ApiError(
                400,
                "We could not parse the JSON body of your request. (HINT: This likely means you "
                "aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, "
                "but what was sent was not valid JSON.)",
            )
        request = _parse_request(body, self.dims, self.limits)
        marker = self._faults.find_marker(request.inputs)
        if marker is not None:
            # Like OpenAI, the whole request fails and the error does not say which input.
            raise _ApiError(
                400,
                f"Invalid input: the request contains rejected content ({marker!r}).",
                param="input",
            )
        return _Reply(200, _embedding_payload(request))

    def _check_auth(self, headers: Mapping[str, str]) -> None:
        if self.api_key is None:
            return
        scheme, _, key = (headers.get("Authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise _missing_key_error()
        if key.strip() != self.api_key:
            raise _wrong_key_error(key.strip())

    def _serve_models(self, route: str) -> _Reply:
        entries = {
            name: {"id": name, "object": "model", "created": 1705948997, "owned_by": "system"}
            for name in self.models
        }
        if route == "/v1/models":
            return _Reply(200, {"object": "list", "data": list(entries.values())})
        name = route.removeprefix("/v1/models/")
        if name not in entries:
            raise _ApiError(
                404, f"The model '{name}' does not exist", code="model_not_found", param="model"
            )
        return _Reply(200, entries[name])


# --------------------------------------------------------------------------- CLI


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--dims", type=int, default=DEFAULT_DIMS)
    parser.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY'")
    parser.add_argument(
        "--model",
        action="append",
        dest="models",
        help="model listed by GET /v1/models (repeatable)",
    )
    parser.add_argument("--max-input-tokens", type=int, default=MAX_INPUT_TOKENS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until SIGTERM/SIGINT; print `READY <base_url>` once listening."""
    args = _parse_args(argv)
    stop_requested = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop_requested.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    server = EmbeddingServer(
        args.dims,
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        models=args.models or (DEFAULT_MODEL,),
        max_input_tokens=args.max_input_tokens,
    ).start()
    print(f"READY {server.url}", flush=True)
    try:
        # A timed wait keeps the main thread responsive to signals on every platform.
        while not stop_requested.wait(0.5):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())


EMBEDDING_DIMS = 128

"""Helpers for the tests of validation at the door: apps over the test Redis, uvicorn, raw HTTP."""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import redis
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.app import create_app
from shared.agents import AgentConfig, Agents
from shared.runtime import Runtime
from tests.support.redis_server import free_port
from tests.support.stack import stack_settings

BASE_TS = 1_718_000_000_000
TEXT = "the harbour lights were far away"
START_TIMEOUT = 10.0

MakeApp = Callable[..., FastAPI]


def agents(**kwargs: Any) -> Agents:
    """mythos and polaris listed, unlisted agents refused unless `accept_unlisted` says so."""
    listed = [
        AgentConfig(name="mythos", self_speaker="Mythos", speaker_aliases={"111": "Alex"}),
        AgentConfig(name="polaris", self_speaker="Polaris"),
    ]
    return Agents(listed, accept_unlisted=kwargs.pop("accept_unlisted", False), **kwargs)


@contextmanager
def app_factory(redis_url: str, embedding_url: str, tmp_path: Path) -> Iterator[MakeApp]:
    """Builds apps over the test Redis; each gets its own data folder (local-mode Qdrant)."""
    count = itertools.count()
    with ExitStack() as stack:

        def make(listed: Agents | None = None, **overrides: Any) -> FastAPI:
            data_dir = tmp_path / f"app{next(count)}"
            settings = stack_settings(redis_url, embedding_url, data_dir, **overrides)
            runtime = Runtime.build(settings, agents=listed or agents())
            stack.callback(runtime.close)
            return create_app(settings, runtime=runtime)

        yield make


@contextmanager
def client_for(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@contextmanager
def served(app: FastAPI) -> Iterator[tuple[str, int]]:
    """The app on uvicorn at 127.0.0.1 (as `memory-pool serve` binds it); (host, port)."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", ws="none")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield "127.0.0.1", port
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def raw_request(address: tuple[str, int], head: str, body: bytes = b"") -> socket.socket:
    """A connection that has sent `head` (request line and headers) and `body`, and no more."""
    sock = socket.create_connection(address, timeout=5)
    sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
    return sock


def read_response(sock: socket.socket, timeout: float) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of the answer, which must come within `timeout` seconds."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before an answer: {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside the answer"
        rest += chunk
    return int(lines[0].split()[1]), headers, rest[:length]


def snapshot(r: redis.Redis) -> dict[str, tuple[str, int]]:
    """Every key with its type and size: what a refused request must leave as it was."""
    found = {}
    for key in r.scan_iter("*"):
        kind = r.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        size = {"list": r.llen, "hash": r.hlen, "set": r.scard, "zset": r.zcard}.get(kind)
        found[key.decode() if isinstance(key, bytes) else key] = (kind, size(key) if size else 0)
    return found


def is_error_shape(body: Any) -> bool:
    return (
        isinstance(body, dict)
        and set(body) == {"error", "detail"}
        and all(isinstance(body[k], str) and body[k] for k in ("error", "detail"))
    )


def is_openai_error_shape(body: Any) -> bool:
    """OpenAI's error body, which every answer under /v1/ takes."""
    error = body.get("error") if isinstance(body, dict) and set(body) == {"error"} else None
    return (
        isinstance(error, dict)
        and set(error) == {"message", "type", "param", "code"}
        and isinstance(error["message"], str)
        and bool(error["message"])
        and error["type"] in ("invalid_request_error", "server_error", "rate_limit_exceeded")
        and all(error[k] is None or isinstance(error[k], str) for k in ("param", "code"))
    )


def is_qdrant_error_shape(body: Any) -> bool:
    """Qdrant's error shape, as /qdrant answers: `{"status": {"error": ...}, "time": ...}`."""
    return (
        isinstance(body, dict)
        and set(body) == {"status", "time"}
        and isinstance(body["status"], dict)
        and set(body["status"]) == {"error"}
        and isinstance(body["status"]["error"], str)
        and bool(body["status"]["error"])
        and isinstance(body["time"], float | int)
    )


def message(mid: str, text: str = TEXT, **fields: Any) -> dict[str, Any]:
    return {"message_id": mid, "text": text, "ts": BASE_TS, **fields}

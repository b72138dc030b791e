"""`memory-pool serve` as a subprocess for tests: its environment and command, waiting until it
answers, and until a process is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import redis

from tests.support.embedding_server import EmbeddingServer
from tests.support.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]

START_TIMEOUT = 30.0

STOP_TIMEOUT = 20.0


def discord_body(message_id: str, text: str, channel: str) -> dict[str, Any]:
    """The Discord plugin's /save body for one message."""
    message = {
        "speaker_kind": "user", "discord_user_id": "1", "speaker_name": "Alex", "text": text,
        "message_id": message_id, "ts": 1718000000000 + int(message_id) * 1000,
        "channel_id": channel,
    }  # fmt: skip
    return {"bot": "mythos", "messages": [message]}


FLUSHED = discord_body("1", "the lighthouse keeper sang to the harbour whales at dawn", "c")

FLUSHED_QUERY = "do you remember the lighthouse keeper and the whales?"


def serve_env(embeddings: EmbeddingServer) -> dict[str, str]:
    """The user's environment: no Redis or Qdrant of their own, an OpenAI-compatible endpoint."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"REDIS_URL", "QDRANT_URL"}
        and not key.startswith(("MEMORY_POOL_", "EMBEDDING_"))
    }
    env.update(
        EMBEDDING_PROVIDER="openai", EMBEDDING_BASE_URL=embeddings.url, OPENAI_API_KEY="test"
    )
    return env


def serve_command(data_dir: Path, port: int) -> list[str]:
    return [sys.executable, "-m", "memory_pool.main", "serve", "--port", str(port),
            "--data-dir", str(data_dir)]  # fmt: skip


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    http: httpx.Client
    data_dir: Path
    log: Path

    def post(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        response = self.http.post(path, json=body)
        assert response.status_code in (200, 202), f"{response.text}\n{self.log_tail()}"
        return response.json()

    def retrieve(self, query: str) -> dict[str, Any]:
        return self.post("/retrieve", {"bot": "mythos", "query_text": query})

    def flush(self) -> dict[str, Any]:
        return self.post("/agents/mythos/flush?wait=true")

    def redis_pid(self) -> int:
        client = redis.Redis(unix_socket_path=str(self.data_dir / "redis" / "redis.sock"))
        pid = int(client.info("server")["process_id"])
        client.close()
        return pid

    def interrupt(self) -> int:
        """Ctrl-C; the exit code."""
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=STOP_TIMEOUT)

    def log_tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])


def _wait_healthy(served: Served) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        assert served.process.poll() is None, f"serve exited at start:\n{served.log_tail()}"
        try:
            if served.http.get("/health").json().get("status") == "ok":
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"serve did not become healthy:\n{served.log_tail()}")


@contextmanager
def serving(data_dir: Path, env: dict[str, str], log: Path) -> Iterator[Served]:
    port = free_port()
    with log.open("ab") as sink:
        process = subprocess.Popen(
            serve_command(data_dir, port), cwd=ROOT, env=env, stdout=sink, stderr=sink
        )
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=40)
    served = Served(process, http, data_dir, log)
    try:
        _wait_healthy(served)
        yield served
    finally:
        http.close()
        if process.poll() is None:
            process.kill()
        process.wait()


def gone(pid: int) -> bool:
    """Whether the process has ended (a zombie nobody reaped counts as ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True

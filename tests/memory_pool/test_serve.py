"""`memory-pool serve` run as a user runs it: one process, data in one folder, restarts remember."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from tests.memory_pool.test_embedded_redis import wait_gone
from tests.support.embedding_server import EmbeddingServer
from tests.support.minilm import model_folder
from tests.support.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0
FORMATTED_HEAD = "\n[Past chat memories]\n\n"


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
OPEN = discord_body("2", "my grandmother grows purple tomatoes in her greenhouse", "c2")
OPEN_QUERY = "what does grandmother grow in the greenhouse?"


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


def local_model_env(embeddings: EmbeddingServer) -> dict[str, str]:
    """serve's own default: the local all-MiniLM-L6-v2, here from its offline folder."""
    folder = model_folder()
    assert folder is not None, "no MiniLM folder: run `python -m tests.support.minilm`"
    env = serve_env(embeddings)
    for key in ("EMBEDDING_PROVIDER", "EMBEDDING_BASE_URL", "OPENAI_API_KEY"):
        env.pop(key)
    return env | {"EMBEDDING_MODEL_PATH": str(folder)}


@pytest.mark.parametrize("make_env", [local_model_env, serve_env], ids=["local-model", "openai"])
def test_serve_runs_everything_and_remembers_across_a_restart(
    tmp_path: Path, embeddings: EmbeddingServer, make_env: Callable[..., dict[str, str]]
) -> None:
    env, data_dir, log = make_env(embeddings), tmp_path / "data", tmp_path / "serve.log"
    with serving(data_dir, env, log) as first:
        assert first.post("/save", FLUSHED)["accepted"] == 1
        assert first.flush()["done"]
        found = first.retrieve(FLUSHED_QUERY)
        assert found["hits"], first.log_tail()
        assert found["formatted"].startswith(FORMATTED_HEAD)
        # saved but never written: its chunk stays open in Redis over the restart
        assert first.post("/save", OPEN)["accepted"] == 1
        assert not first.retrieve(OPEN_QUERY)["hits"]
        _second_serve_on_the_same_folder_is_refused(data_dir, env, tmp_path)
        redis_pid = first.redis_pid()
        assert first.interrupt() == 0, first.log_tail()
    assert wait_gone(redis_pid, timeout=1), "the embedded redis-server outlived serve"

    with serving(data_dir, env, log) as second:
        again = second.retrieve(FLUSHED_QUERY)
        assert [h["id"] for h in again["hits"]] == [h["id"] for h in found["hits"]]
        assert second.flush()["done"]
        kept = second.retrieve(OPEN_QUERY)["hits"]
        assert [h["payload"]["messageIds"] for h in kept] == ["2"], second.log_tail()
        # the memory viewer is served by serve too, on the same port
        page = second.http.get("/ui")
        assert page.status_code == 200 and "memory-pool viewer" in page.text
        assert second.http.get("/ui/viewer.js").status_code == 200
        shown = second.http.get("/agents").json()["agents"]
        assert [a["name"] for a in shown] == ["mythos"]
        listed = second.http.get("/agents/mythos/memories").json()["memories"]
        assert {m["id"] for m in listed} >= {h["id"] for h in found["hits"]}
        assert second.interrupt() == 0, second.log_tail()


def _second_serve_on_the_same_folder_is_refused(
    data_dir: Path, env: dict[str, str], tmp_path: Path
) -> None:
    result = subprocess.run(
        serve_command(data_dir, free_port()),
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=START_TIMEOUT,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "in use by another memory-pool" in result.stderr


def test_worker_without_qdrant_url_exits_2_saying_why(embeddings: EmbeddingServer) -> None:
    # REDIS_URL is set (and never reached): the missing QDRANT_URL is the only problem.
    env = serve_env(embeddings) | {"REDIS_URL": "redis://127.0.0.1:1/0"}
    result = subprocess.run(
        [sys.executable, "-m", "memory_pool.main", "worker"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=START_TIMEOUT,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "needs QDRANT_URL" in result.stderr
    assert "only one process may open" in result.stderr
    assert "memory-pool serve" in result.stderr

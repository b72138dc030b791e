"""`memory-pool serve` run as a user runs it: one process, data in one folder, restarts remember."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.embedding_server import EmbeddingServer
from tests.support.minilm import model_folder
from tests.support.redis_server import free_port
from tests.support.serve import (
    FLUSHED,
    FLUSHED_QUERY,
    ROOT,
    START_TIMEOUT,
    discord_body,
    serve_command,
    serve_env,
    serving,
    wait_gone,
)

FORMATTED_HEAD = "\n[Past chat memories]\n\n"


OPEN = discord_body("2", "my grandmother grows purple tomatoes in her greenhouse", "c2")
OPEN_QUERY = "what does grandmother grow in the greenhouse?"


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

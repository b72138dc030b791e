"""A real Redis server for tests: started on a free port, never touching one already running."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis

# The persistence memory-pool ships (README, "What a Redis crash can lose").
SHIPPED_PERSISTENCE = ("--appendonly", "yes", "--appendfsync", "everysec")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def find_redis_server() -> str:
    found = shutil.which("redis-server")
    if found is None:
        raise RuntimeError(
            "redis-server is not on the PATH: install Redis (Debian: apt-get install redis-server)"
        )
    return found


class RedisServer:
    """One redis-server process with its own port and folder; stop and start keep the data."""

    def __init__(
        self, *, persistent: bool = False, data_dir: Path | None = None, binary: str | None = None
    ) -> None:
        self.port = free_port()
        self.binary = binary
        self.persistent = persistent
        self._tmp = None if data_dir else tempfile.TemporaryDirectory(prefix="mp-redis-")
        self.data_dir = data_dir or Path(self._tmp.name)  # type: ignore[union-attr]
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _command(self) -> list[str]:
        command = [
            self.binary or find_redis_server(), "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.data_dir), "--save", "", "--maxmemory-policy", "noeviction",
        ]  # fmt: skip
        if self.persistent:
            command.extend(SHIPPED_PERSISTENCE)
        return command

    def start(self) -> RedisServer:
        self._process = subprocess.Popen(
            self._command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    client.ping()
                    return self
                except redis.ConnectionError:
                    if time.monotonic() > deadline or self._process.poll() is not None:
                        raise
                    time.sleep(0.02)
        finally:
            client.close()

    def stop(self, *, kill: bool = False) -> None:
        """Stop it; `kill` is a crash (SIGKILL), with no chance to write anything more."""
        if self._process is None:
            return
        if kill:
            self._process.kill()
        else:
            self._process.terminate()
        self._process.wait(timeout=10)
        self._process = None

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

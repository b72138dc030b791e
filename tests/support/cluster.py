"""The multi-process harness's parts: `memory-pool worker` and `scheduler` processes (Proc), the
cluster around the test servers, Discord-shaped conversations and the exactly-once check."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from shared.settings import Settings
from tests.support.embedding_server import EmbeddingServer
from tests.support.qdrant_server import QdrantTestServer
from tests.support.redis_server import RedisServer

EMBEDDING_DIMS = 128

WORKERS = 3

LEASE_SECONDS = 11  # above twice the Qdrant timeout, as the settings require

START_TIMEOUT_S = 30.0

BASE_TS = 1_718_000_000_000

CLI = Path(sys.executable).with_name("memory-pool")

FLUSH_DONE = re.compile(r"Task memory_pool\.flush\[[^]]+\] succeeded")

SETTINGS_KEYS = ("REDIS_URL", "QDRANT_URL", "EMBEDDING_", "OPENAI_", "MEMORY_POOL_")


def wait_until(check: Callable[[], Any], timeout: float, what: str, every: float = 0.05) -> Any:
    """Poll `check` until it returns something truthy; fail with `what` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


@dataclass
class Proc:
    """One `memory-pool` subprocess in its own process group, logging to its own file."""

    name: str
    args: list[str]
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None
    mark: int = 0  # log offset where the current test began

    def start(self, env: dict[str, str]) -> None:
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                [str(CLI), *self.args],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: a prefork pool dies with it
            )

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_since_mark(self) -> str:
        return self.log()[self.mark :]

    def set_mark(self) -> None:
        self.mark = len(self.log())

    def kill(self) -> None:
        """SIGKILL the whole process group: a crash, nothing gets to clean up."""
        if self.popen is None:
            return
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it died on its own meanwhile
                os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=10)


@dataclass
class Cluster:
    redis: RedisServer
    qdrant: QdrantTestServer
    embeddings: EmbeddingServer
    env: dict[str, str]
    settings: Settings
    logs: Path
    workers: list[Proc] = field(default_factory=list)
    scheduler: Proc | None = None
    client: TestClient | None = None
    _started: int = 0

    # --- processes -------------------------------------------------------------------------
    def start_worker(self) -> Proc:
        self._started += 1
        worker = Proc(
            f"worker{self._started}",
            ["worker", "--pool", "solo", "--concurrency", "1"],
            self.logs / f"worker{self._started}.log",
        )
        worker.start(self.env)
        self.workers.append(worker)
        return worker

    def ensure_running(self, workers: int = WORKERS) -> None:
        """Servers up, no faults, `workers` live workers and a live scheduler, all ready."""
        self.embeddings.clear_faults()
        self.qdrant.clear_faults()
        self.qdrant.start()
        self.workers = [w for w in self.workers if w.alive]
        for extra in self.workers[workers:]:
            extra.kill()
        self.workers = self.workers[:workers]
        fresh = [self.start_worker() for _ in range(workers - len(self.workers))]
        if self.scheduler is None or not self.scheduler.alive:
            self._started += 1  # a log of its own, so an old "started" line cannot match
            log = self.logs / f"scheduler{self._started}.log"
            self.scheduler = Proc("scheduler", ["scheduler"], log)
            self.scheduler.start(self.env)
            fresh.append(self.scheduler)
        for proc in fresh:
            ready = "ready." if proc is not self.scheduler else "scheduler started"
            wait_until(lambda p=proc, r=ready: r in p.log() or not p.alive, START_TIMEOUT_S,
                       f"{proc.name} to start")  # fmt: skip
            assert proc.alive, f"{proc.name} exited:\n{proc.log()[-3000:]}"
        for proc in self.processes():
            proc.set_mark()

    def processes(self) -> list[Proc]:
        return [*self.workers, *([self.scheduler] if self.scheduler else [])]

    def worker_by_client_port(self, port: int) -> Proc:
        """The worker holding the client end (local TCP port `port`) of a request to Qdrant."""
        inode = _socket_inode(port, self.qdrant.port)
        for worker in self.workers:
            if worker.alive and inode in _socket_inodes(worker.pid):
                return worker
        raise AssertionError(f"no live worker holds local port {port}")

    def flush_tasks_done(self) -> dict[str, int]:
        """Flush tasks each live worker finished since the test began."""
        return {w.name: len(FLUSH_DONE.findall(w.log_since_mark())) for w in self.workers}

    def shutdown(self) -> None:
        for proc in self.processes():
            proc.kill()

    # --- the API ---------------------------------------------------------------------------
    @property
    def api(self) -> TestClient:
        assert self.client is not None
        return self.client

    def flush(self, bot: str, timeout: float = 30.0) -> dict[str, Any]:
        response = self.api.post(
            f"/agents/{bot}/flush", params={"wait": "true", "timeout": str(timeout)}
        )
        assert response.status_code == 200, response.text
        assert response.json()["done"], f"flush of {bot} not done: {response.json()}"
        return response.json()

    # --- what Qdrant holds -----------------------------------------------------------------
    def stored_ids(self, bot: str) -> list[str]:
        """Every message id in every point of the agent's collection, with repeats."""
        collection = f"mem_{bot}"
        ids: list[str] = []
        with self.qdrant.local() as client:
            if not client.collection_exists(collection):
                return ids
            offset = None
            while True:
                points, offset = client.scroll(
                    collection, limit=256, offset=offset, with_payload=True, with_vectors=False
                )
                for point in points:
                    ids.extend(str(i) for i in (point.payload or {}).get("messageIdList", []))
                if offset is None:
                    return ids


def exactly_once_problems(stored: Iterable[str], expected: Iterable[str]) -> dict[str, list[str]]:
    """What breaks "every expected message in exactly one chunk": empty when all is well."""
    counts = Counter(stored)
    wanted = set(expected)
    problems = {
        "doubled": sorted(i for i, n in counts.items() if n > 1),
        "missing": sorted(wanted - counts.keys()),
        "unexpected": sorted(counts.keys() - wanted),
    }
    return {kind: ids for kind, ids in problems.items() if ids}


def assert_exactly_once(stored: Iterable[str], expected: Iterable[str]) -> None:
    problems = exactly_once_problems(stored, expected)
    assert not problems, {kind: (len(ids), ids[:10]) for kind, ids in problems.items()}


def _socket_inode(port: int, peer_port: int) -> str:
    """The inode of the live socket from local `port` to `peer_port`.

    The local port alone is not enough: Linux gives one ephemeral port to connections to other
    destinations at once, and a closed connection's TIME_WAIT row keeps it with inode 0.
    """
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as rows:
            next(rows)
            for row in rows:
                cols = row.split()
                local, remote, inode = cols[1], cols[2], cols[9]
                if (
                    int(local.rsplit(":", 1)[1], 16) == port
                    and int(remote.rsplit(":", 1)[1], 16) == peer_port
                    and inode != "0"
                ):
                    return inode
    raise AssertionError(f"no live socket from local port {port} to port {peer_port}")


def _socket_inodes(pid: int) -> set[str]:
    found = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(target[len("socket:[") : -1])
    return found


def discord_message(n: int, channel: str, *, text: str | None = None) -> dict[str, Any]:
    """The Discord plugin's message shape; odd turns are the bot's own."""
    own = n % 2 == 1
    message: dict[str, Any] = {
        "speaker_kind": "self" if own else "user",
        "discord_user_id": "999" if own else "111",
        "text": text or f"message number {n} in {channel}: the harbour lights were {n} miles away",
        "message_id": f"{channel}-{n:04d}",
        "ts": BASE_TS + n * 60_000,
        "channel_id": channel,
        "guild_id": "g1",
    }
    if not own:
        message["speaker_name"] = "alex_on_discord"
    return message


class Conversations:
    """Channels of one agent, re-sent the Discord plugin's way: the last 30 messages a turn."""

    WINDOW = 30

    def __init__(self, bot: str, channels: int, *, prefix: str = "c") -> None:
        self.bot = bot
        self.history: dict[str, list[dict[str, Any]]] = {
            f"{prefix}{c}": [] for c in range(channels)
        }
        self.acked: set[str] = set()  # ids in some request answered 202
        self.statuses: Counter[int] = Counter()

    def turn(self, api: TestClient, text: Callable[[int, str], str | None] | None = None) -> None:
        """One new message in every channel, each channel's window posted to /save."""
        for channel, log in self.history.items():
            n = len(log)
            log.append(discord_message(n, channel, text=text(n, channel) if text else None))
            self.post(api, log[-self.WINDOW :])

    def post(self, api: TestClient, messages: list[dict[str, Any]]) -> int:
        response = api.post("/save", json={"bot": self.bot, "messages": messages})
        self.statuses[response.status_code] += 1
        if response.status_code == 202:
            body = response.json()
            assert body["skipped"] == 0, body
            self.acked.update(m["message_id"] for m in messages)
        else:
            assert response.status_code == 503, response.text
        return response.status_code

    @property
    def sent(self) -> set[str]:
        return {m["message_id"] for log in self.history.values() for m in log}


def subprocess_env(redis_url: str, qdrant_url: str, embedding_url: str, data: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_POOL_", "QDRANT_"))}
    env.update(
        REDIS_URL=redis_url,
        QDRANT_URL=qdrant_url,
        EMBEDDING_PROVIDER="openai",
        EMBEDDING_BASE_URL=embedding_url,
        OPENAI_API_KEY="x",
        EMBEDDING_MODEL="test-model",
        MEMORY_POOL_LEASE_SECONDS=str(LEASE_SECONDS),
        MEMORY_POOL_SCHEDULER_INTERVAL="0.05",
        MEMORY_POOL_EMBEDDING_TIMEOUT="1",
        MEMORY_POOL_REDIS_TIMEOUT="2",
        MEMORY_POOL_QDRANT_TIMEOUT="5",
        MEMORY_POOL_DATA_DIR=str(data),
        PYTHONUNBUFFERED="1",
    )
    return env

"""A memory-pool deployment of subprocesses on 127.0.0.1: Redis, test servers, API, workers."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from types import TracebackType

import httpx
import redis

from bench.procs import VENV_BIN, Proc, base_env
from tests.support.redis_server import RedisServer, free_port

MODELS_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "models"
LOCAL_MODEL = MODELS_DIR / "all-MiniLM-L6-v2-int8"


class Stack:
    """Starts what a benchmark asks for; `close()` stops every process it started, newest first."""

    def __init__(self, agents_yaml: str | None = None) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="mp-bench-")
        self.dir = Path(self._tmp.name)
        self.procs: list[Proc] = []
        self.redis: RedisServer | None = None
        self.embed_url = ""
        self.qdrant_url = ""
        self.api_url = ""
        self.env: dict[str, str] = {"MEMORY_POOL_DATA_DIR": str(self.dir / "data")}
        if agents_yaml is not None:
            path = self.dir / "agents.yaml"
            path.write_text(agents_yaml)
            self.env["MEMORY_POOL_CONFIG"] = str(path)

    # --- services ----------------------------------------------------------------------
    def start_redis(self) -> str:
        self.redis = RedisServer().start()
        self.env["REDIS_URL"] = self.redis.url
        return self.redis.url

    def _ready_url(self, name: str, argv: list[str]) -> str:
        proc = self.spawn(name, argv)
        return proc.wait_for("READY ").split("READY ", 1)[1].strip()

    def start_embedding(self, dims: int) -> str:
        argv = [sys.executable, "-m", "bench.services", "embed", "--dims", str(dims)]
        self.embed_url = self._ready_url("embedding", argv)
        self.env.update(
            EMBEDDING_PROVIDER="openai",
            EMBEDDING_BASE_URL=self.embed_url,
            OPENAI_API_KEY="bench",
            EMBEDDING_MODEL="text-embedding-3-small",
        )
        return self.embed_url

    def use_local_model(self) -> None:
        for key in ("EMBEDDING_BASE_URL", "OPENAI_API_KEY", "EMBEDDING_MODEL"):
            self.env.pop(key, None)
        self.env.update(EMBEDDING_PROVIDER="local", EMBEDDING_MODEL_PATH=str(LOCAL_MODEL))

    def start_qdrant(self, *, on_disk: bool = False) -> str:
        argv = [sys.executable, "-m", "bench.services", "qdrant"]
        if on_disk:
            argv += ["--path", str(self.dir / "qdrant")]
        self.qdrant_url = self._ready_url("qdrant", argv)
        self.env["QDRANT_URL"] = self.qdrant_url
        return self.qdrant_url

    def start_api(self, *, module: str | None = None) -> Proc:
        """`memory-pool api`, or a bench app module that serves memory-pool's app and more."""
        port = free_port()
        if module is None:
            argv = [str(VENV_BIN / "memory-pool"), "api", "--port", str(port)]
        else:
            argv = [sys.executable, "-m", module, "--port", str(port)]
        proc = self.spawn("api", argv)
        self.api_url = f"http://127.0.0.1:{port}"
        proc.wait_http(f"{self.api_url}/openapi.json")
        return proc

    def start_scheduler(self) -> Proc:
        proc = self.spawn("scheduler", [str(VENV_BIN / "memory-pool"), "scheduler"])
        proc.wait_for("scheduler started")
        return proc

    def start_worker(self, index: int = 0) -> Proc:
        argv = [str(VENV_BIN / "memory-pool"), "worker", "--pool", "solo", "--loglevel", "INFO"]
        proc = self.spawn(f"worker{index}", argv)
        proc.wait_for(" ready.")
        return proc

    def spawn(self, name: str, argv: list[str]) -> Proc:
        proc = Proc(name, argv, base_env(**self.env), self.dir)
        self.procs.append(proc)
        return proc

    # --- counters ----------------------------------------------------------------------
    def counts(self) -> tuple[dict, dict]:
        """(embedding server stats, Qdrant requests by kind)."""
        with httpx.Client(trust_env=False, timeout=10) as client:
            base = self.embed_url.removesuffix("/v1")
            emb = client.get(f"{base}/bench/stats").json() if self.embed_url else {}
            qd = client.get(f"{self.qdrant_url}/bench/stats").json() if self.qdrant_url else {}
        return emb, qd

    def reset_counts(self) -> None:
        with httpx.Client(trust_env=False, timeout=10) as client:
            if self.embed_url:
                client.post(f"{self.embed_url.removesuffix('/v1')}/bench/reset")
            if self.qdrant_url:
                client.post(f"{self.qdrant_url}/bench/reset")

    def redis_client(self) -> redis.Redis:
        assert self.redis is not None
        return redis.Redis(port=self.redis.port)

    def redis_pid(self) -> int:
        assert self.redis is not None and self.redis._process is not None
        return self.redis._process.pid

    def proc(self, name: str) -> Proc:
        return next(p for p in self.procs if p.name == name)

    # --- lifecycle ---------------------------------------------------------------------
    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        self.procs.clear()
        if self.redis is not None:
            self.redis.close()
            self.redis = None
        self._tmp.cleanup()

    def __enter__(self) -> Stack:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

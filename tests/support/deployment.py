"""A live deployment in processes of its own: `memory-pool api`, two `memory-pool worker`s (one
prefork pool of 2, one solo) and `memory-pool scheduler`, each with its metrics port, around
real Redis, the Qdrant REST test server and the embedding test server. JSON logs throughout."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support.cluster import CLI, Proc, wait_until
from tests.support.embedding_server import EmbeddingServer
from tests.support.qdrant_server import QdrantTestServer
from tests.support.redis_server import RedisServer, free_port

OPS_KEY = "ops-key-SECRET-7f3a9c"  # valid for every agent: what Prometheus presents
SCOPED_KEY = "vault-key-SECRET-51be2"
AGENTS_FILE = {
    "accept_unlisted_agents": True,
    "api_keys": [
        {"name": "ops", "key": OPS_KEY},
        {"name": "vault-only", "key": SCOPED_KEY, "agents": ["vault"]},
    ],
    "agents": [
        {"name": "Polaris"},
        {"name": "vault", "require_key": True},
        *({"name": name} for name in ("backlog", "ratelimited", "sweep")),
    ],
}
START_TIMEOUT_S = 60.0

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse_metrics(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 when none)."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


@dataclass
class Deployment:
    api_url: str
    api: Proc
    workers: list[tuple[Proc, int]]
    scheduler: tuple[Proc, int]
    redis: RedisServer
    embeddings: EmbeddingServer
    root: Path
    http: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=30))

    def api_metrics(self) -> Samples:
        response = self.http.get(f"{self.api_url}/metrics", headers=_ops())
        assert response.status_code == 200, response.text
        return parse_metrics(response.text)

    def worker_metrics(self) -> Samples:
        """The workers' endpoints added up, as a PromQL sum() would."""
        total: Samples = {}
        for _, port in self.workers:
            text = self.http.get(f"http://127.0.0.1:{port}/metrics").text
            for key, v in parse_metrics(text).items():
                total[key] = total.get(key, 0.0) + v
        return total

    def scheduler_metrics(self) -> Samples:
        return parse_metrics(self.http.get(f"http://127.0.0.1:{self.scheduler[1]}/metrics").text)

    def save(self, body: dict, **headers: str) -> httpx.Response:
        response = self.http.post(f"{self.api_url}/save", json=body, headers=headers)
        assert response.status_code == 202, response.text
        return response

    def flush(self, bot: str) -> None:
        response = self.http.post(
            f"{self.api_url}/agents/{bot}/flush", params={"wait": "true", "timeout": "30"}
        )
        assert response.status_code == 200 and response.json()["done"], response.text

    def processes(self) -> list[Proc]:
        return [self.api, *(w for w, _ in self.workers), self.scheduler[0]]

    def logs(self) -> str:
        return "".join(proc.log() for proc in self.processes())


def _ops() -> dict[str, str]:
    return {"Authorization": f"Bearer {OPS_KEY}"}


def _env(redis_url: str, qdrant_url: str, embedding_url: str, root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_POOL_", "QDRANT_"))}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    agents = root / "agents.yaml"
    agents.write_text(yaml.safe_dump(AGENTS_FILE), encoding="utf-8")
    env.update(
        REDIS_URL=redis_url,
        QDRANT_URL=qdrant_url,
        EMBEDDING_PROVIDER="openai",
        EMBEDDING_BASE_URL=embedding_url,
        OPENAI_API_KEY="embedding-key-SECRET-99",
        EMBEDDING_MODEL="test-model",
        MEMORY_POOL_CONFIG=str(agents),
        MEMORY_POOL_LOG_FORMAT="json",
        MEMORY_POOL_LEASE_SECONDS="11",
        MEMORY_POOL_SCHEDULER_INTERVAL="0.05",
        MEMORY_POOL_EMBEDDING_TIMEOUT="2",
        MEMORY_POOL_QDRANT_TIMEOUT="5",
        MEMORY_POOL_DATA_DIR=str(root / "data"),
        PYTHONUNBUFFERED="1",
    )
    return env


def _start(root: Path, env: dict[str, str], name: str, args: list[str]) -> Proc:
    proc = Proc(name, args, root / f"{name}.log")
    proc.start(env)
    return proc


@contextmanager
def live_deployment(root: Path) -> Iterator[Deployment]:
    assert CLI.exists(), CLI
    redis_server = RedisServer()
    qdrant = QdrantTestServer(root / "qdrant")
    embeddings = EmbeddingServer(dims=64)
    procs: list[Proc] = []
    deployment: Deployment | None = None
    try:
        redis_server.start()
        qdrant.start()
        embeddings.start()
        env = _env(redis_server.url, qdrant.url, embeddings.url, root)
        api_port = free_port()
        api = _start(root, env, "api", ["api", "--port", str(api_port)])
        ports = [free_port() for _ in range(3)]
        w1 = _start(root, env, "worker1", ["worker", "--pool", "prefork", "--concurrency", "2",
                                           "--metrics-port", str(ports[0])])  # fmt: skip
        w2 = _start(root, env, "worker2", ["worker", "--pool", "solo", "--concurrency", "1",
                                           "--metrics-port", str(ports[1])])  # fmt: skip
        sched = _start(root, env, "scheduler", ["scheduler", "--metrics-port", str(ports[2])])
        procs.extend([api, w1, w2, sched])
        deployment = Deployment(
            f"http://127.0.0.1:{api_port}", api, [(w1, ports[0]), (w2, ports[1])],
            (sched, ports[2]), redis_server, embeddings, root,
        )  # fmt: skip
        _wait_ready(deployment)
        yield deployment
    finally:
        if deployment is not None:
            deployment.http.close()
        for proc in procs:
            proc.kill()
        embeddings.stop()
        qdrant.stop()
        redis_server.close()


def _wait_ready(d: Deployment) -> None:
    for proc, marker in [(w, "ready.") for w, _ in d.workers] + [(d.scheduler[0], "started")]:
        wait_until(lambda p=proc, m=marker: m in p.log() or not p.alive, START_TIMEOUT_S,
                   f"{proc.name} to start")  # fmt: skip
        assert proc.alive, f"{proc.name} exited:\n{proc.log()[-3000:]}"

    def api_up() -> bool:
        assert d.api.alive, d.api.log()[-3000:]
        try:
            return d.http.get(f"{d.api_url}/health", headers=_ops()).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(api_up, START_TIMEOUT_S, "the API to answer")
    time.sleep(0.2)


TS = 1_718_000_000_000


def messages(channel: str, count: int, *, start: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "message_id": f"{channel}-{n}",
            "text": f"turn {n} of {channel}: the lighthouse keeper counted {n} ships",
            "ts": TS + n * 60_000,
            "channel_id": channel,
            "speaker_kind": "user",
            "discord_user_id": "111",
        }
        for n in range(start, start + count)
    ]

"""Debian's Prometheus scrapes a live deployment with the committed scrape config (service
discovery swapped for this machine's ports) and answers every query of the committed dashboard."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support.cluster import wait_until
from tests.support.deployment import OPS_KEY, Deployment, messages
from tests.support.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]
SCRAPE_CONFIG = ROOT / "monitoring/prometheus/prometheus.yml"
DASHBOARD = ROOT / "monitoring/grafana/dashboards/memory-pool.json"


def scrape_config_for(d: Deployment) -> dict[str, Any]:
    """The committed config, scraping every second, with each job's DNS discovery replaced by
    this deployment's addresses (Prometheus' DNS discovery asks DNS servers, not /etc/hosts)."""
    config = yaml.safe_load(SCRAPE_CONFIG.read_text(encoding="utf-8"))
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    api_port = d.api_url.rsplit(":", 1)[1]
    targets = {
        "memory-pool-api": [f"127.0.0.1:{api_port}"],
        "memory-pool-worker": [f"127.0.0.1:{port}" for _, port in d.workers],
        "memory-pool-scheduler": [f"127.0.0.1:{d.scheduler[1]}"],
    }
    for job in config["scrape_configs"]:
        assert job.pop("dns_sd_configs"), job
        job["static_configs"] = [{"targets": targets.pop(job["job_name"])}]
        if job["job_name"] == "memory-pool-api":  # the deployment has API keys
            job["authorization"] = {"type": "Bearer", "credentials": OPS_KEY}
    assert not targets, f"jobs missing from {SCRAPE_CONFIG}: {sorted(targets)}"
    return config


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    assert len(exprs) >= 15
    return [expr.replace("$__rate_interval", "1m") for expr in exprs]


@pytest.fixture
def prometheus(deployment: Deployment) -> Iterator[str]:
    binary = shutil.which("prometheus")
    assert binary, "Debian's prometheus package is required (`make test` installs it)"
    folder = deployment.root / "prometheus"
    folder.mkdir()
    config = folder / "prometheus.yml"
    config.write_text(yaml.safe_dump(scrape_config_for(deployment)), encoding="utf-8")
    port = free_port()  # never 9090 by default: it may be taken
    with (folder / "prometheus.log").open("wb") as log:
        process = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _ready(url, process), 60, "Prometheus to start", every=0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _ready(url: str, process: subprocess.Popen[bytes]) -> bool:
    assert process.poll() is None, "Prometheus exited"
    try:
        return httpx.get(f"{url}/-/ready", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _traffic(d: Deployment, round_: int) -> None:
    """Every kind of event a panel shows: intake, a refusal, a 429 retry, flushes, recall."""
    body = messages(f"prom{round_}", 3)
    body.append({**messages(f"prom{round_}", 1, start=9)[0], "message_id": "bad,id"})
    d.save({"bot": "Polaris", "messages": body})
    d.embeddings.fail_next(429, times=1, retry_after=0.1)
    d.flush("Polaris")
    for _ in range(2):
        query = {"bot": "Polaris", "query_text": "the lighthouse keeper's ships"}
        assert d.http.post(f"{d.api_url}/retrieve", json=query).status_code == 200


def _query(url: str, expr: str) -> list[Any]:
    answer = httpx.get(f"{url}/api/v1/query", params={"query": expr}, timeout=10).json()
    assert answer["status"] == "success", (expr, answer)
    return answer["data"]["result"]


def test_every_dashboard_query_returns_data(deployment: Deployment, prometheus: str) -> None:
    def all_up() -> bool:
        up = _query(prometheus, "up")
        return len(up) == 4 and all(sample["value"][1] == "1" for sample in up)

    wait_until(all_up, 30, "Prometheus to scrape all four targets", every=0.5)
    _traffic(deployment, 1)
    time.sleep(3)  # a few scrapes, so rates have two points on each side of the traffic
    _traffic(deployment, 2)
    time.sleep(3)
    jobs = {s["metric"]["job"] for s in _query(prometheus, "up")}
    assert jobs == {"memory-pool-api", "memory-pool-worker", "memory-pool-scheduler"}
    empty = [expr for expr in dashboard_queries() if not _query(prometheus, expr)]
    assert not empty, f"dashboard queries without data: {empty}"

"""The compose deployment: services, images, persistence and commands, read from the file."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))


def test_services_and_pinned_images() -> None:
    services = compose()["services"]
    default = {name for name, spec in services.items() if "profiles" not in spec}
    assert default == {"qdrant", "redis", "api", "worker", "scheduler"}
    assert re.fullmatch(r"qdrant/qdrant:v\d+\.\d+\.\d+", services["qdrant"]["image"])
    assert re.fullmatch(r"redis:\d+\.\d+(-alpine)?", services["redis"]["image"])


def test_named_volumes_keep_the_data() -> None:
    data = compose()
    assert set(data["volumes"]) == {"qdrant_data", "redis_data", "prometheus_data", "grafana_data"}
    assert "qdrant_data:/qdrant/storage" in data["services"]["qdrant"]["volumes"]
    assert "redis_data:/data" in data["services"]["redis"]["volumes"]


def test_redis_persistence_is_what_readme_states() -> None:
    command = compose()["services"]["redis"]["command"]
    flags = dict(zip(command[1::2], command[2::2], strict=True))
    assert flags == {
        "--appendonly": "yes",
        "--appendfsync": "everysec",
        "--save": "",
        "--maxmemory-policy": "noeviction",
    }
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "appendfsync everysec" in readme


def test_one_image_and_the_right_commands() -> None:
    services = compose()["services"]
    roles = {"api": "api", "worker": "worker", "scheduler": "scheduler"}
    for service, role in roles.items():
        spec = services[service]
        assert spec["build"] == "." and spec["image"] == "memory-pool:local"
        assert spec["command"][:2] == ["memory-pool", role]
        assert spec["environment"]["EMBEDDING_PROVIDER"] == "openai"
        assert spec["environment"]["REDIS_URL"] == "redis://redis:6379/0"
        assert spec["environment"]["QDRANT_URL"] == "http://qdrant:6333"
        assert spec["env_file"] == ".env"  # the key comes from an env file, never the repo
        assert spec["depends_on"]["redis"]["condition"] == "service_healthy"
    assert services["api"]["ports"] == ["127.0.0.1:3102:3102"]
    assert services["scheduler"]["deploy"]["replicas"] == 1  # must be single
    assert "deploy" not in services["worker"]  # scaled with --scale worker=N
    assert (ROOT / "Dockerfile").is_file() and (ROOT / ".env.example").is_file()


def test_every_service_has_a_health_check_or_depends_on_one() -> None:
    services = compose()["services"]
    for name in ("qdrant", "redis", "api"):
        assert services[name]["healthcheck"]["test"]


def test_the_monitoring_profile_is_optional_pinned_and_provisioned() -> None:
    services = compose()["services"]
    monitoring = {
        name for name, spec in services.items() if "monitoring" in spec.get("profiles", [])
    }
    assert monitoring == {"prometheus", "grafana"}
    assert re.fullmatch(r"prom/prometheus:v\d+\.\d+\.\d+", services["prometheus"]["image"])
    assert re.fullmatch(r"grafana/grafana:\d+\.\d+\.\d+", services["grafana"]["image"])
    for spec in (services["prometheus"], services["grafana"]):
        for volume in spec["volumes"]:
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), source
    # Each scraped process serves its metrics where prometheus.yml looks for them.
    assert services["worker"]["command"][-4:] == [
        "--metrics-port",
        "9108",
        "--metrics-host",
        "0.0.0.0",
    ]
    assert services["scheduler"]["command"][-4:] == [
        "--metrics-port",
        "9109",
        "--metrics-host",
        "0.0.0.0",
    ]
    scrape = yaml.safe_load((ROOT / "monitoring/prometheus/prometheus.yml").read_text())
    ports = {job["job_name"]: job["dns_sd_configs"][0]["port"] for job in scrape["scrape_configs"]}
    assert ports == {
        "memory-pool-api": 3102,
        "memory-pool-worker": 9108,
        "memory-pool-scheduler": 9109,
    }


def test_a_compose_client_accepts_the_file(tmp_path: Path) -> None:
    # docker compose reads .env beside the file; the example is what a user copies there.
    for name in ("docker-compose.yml", ".env.example"):
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    (tmp_path / ".env").write_bytes((ROOT / ".env.example").read_bytes())
    for folder in ("monitoring", "config"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    binary = shutil.which("docker-compose")
    assert binary, "docker-compose is missing: scripts/test-tools.sh installs it"
    checked = subprocess.run(
        [binary, "-f", "docker-compose.yml", "config", "-q"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr

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


def compose_config(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("docker-compose")
    assert binary, "Debian's docker-compose package is required (`make test` installs it)"
    return subprocess.run(
        [binary, *args, "config", "-q"], cwd=folder, capture_output=True, text=True, timeout=60
    )


def test_a_compose_client_accepts_the_file(tmp_path: Path) -> None:
    # Compose's own schema and merging (the x-memory-pool anchor, profiles, depends_on
    # conditions), beyond the keys read above. In a copy: the client needs the .env that README's
    # first step makes from .env.example, and the checkout's own .env is the user's.
    shutil.copy(ROOT / "docker-compose.yml", tmp_path)
    shutil.copy(ROOT / ".env.example", tmp_path / ".env")
    for args in ((), ("--profile", "monitoring")):
        result = compose_config(tmp_path, *args)
        assert result.returncode == 0, result.stderr
    # The client does refuse a broken file, so the passes above mean something.
    text = (tmp_path / "docker-compose.yml").read_text(encoding="utf-8")
    (tmp_path / "docker-compose.yml").write_text(
        text.replace("restart: unless-stopped", "restart: [unless-stopped]", 1), encoding="utf-8"
    )
    broken = compose_config(tmp_path)
    assert broken.returncode != 0 and "restart contains an invalid type" in broken.stderr

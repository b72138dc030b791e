"""The monitoring profile's API key lives in the repository's folder (README: "put an all-agents
key in monitoring/prometheus/api_key"): git must never pick it up."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_prometheus_api_key_file_is_ignored_by_git() -> None:
    # Fails on main 2987668: `git add -A` would commit the all-agents key.
    found = subprocess.run(
        ["git", "check-ignore", "--no-index", "-q", "monitoring/prometheus/api_key"],
        cwd=ROOT, check=False,
    )  # fmt: skip
    assert found.returncode == 0

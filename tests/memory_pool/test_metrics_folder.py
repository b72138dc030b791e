"""Two workers on one host with one PROMETHEUS_MULTIPROC_DIR (set machine-wide, as
prometheus-client's docs show): each port must serve its own run's values."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

RUN = """
import sys
from memory_pool.metrics_server import use_fresh_multiprocess_dir
use_fresh_multiprocess_dir()
from prometheus_client import CollectorRegistry, multiprocess
from shared.ops import metrics
metrics.FLUSH_CHUNKS.inc(int(sys.argv[1]))
print("ready", flush=True)
sys.stdin.readline()  # until the other worker has started
registry = CollectorRegistry()
multiprocess.MultiProcessCollector(registry)
print(registry.get_sample_value("memory_pool_flush_chunks_written_total"), flush=True)
"""


def _start(chunks: int, env: dict[str, str]) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", RUN, str(chunks)], cwd=ROOT, env=env, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process


def _total(process: subprocess.Popen[str]) -> float:
    out, _ = process.communicate("go\n", timeout=30)
    assert process.returncode == 0
    return float(out.strip())


def test_two_workers_sharing_the_folder_each_serve_their_own_counts(tmp_path: Path) -> None:
    # Fails on main 2987668: the second start emptied the shared folder, so the first worker's
    # values vanished and its port served the second's (3 read as 5: counted twice, 3 lost).
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "shared")}
    first = _start(3, env)
    second = _start(5, env)
    assert _total(second) == 5
    assert _total(first) == 3

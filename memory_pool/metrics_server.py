"""The metrics port of `memory-pool worker` and `memory-pool scheduler` (`--metrics-port`).

A prefork worker's flushes run in child processes: prometheus-client's multiprocess mode keeps
each child's values in files under PROMETHEUS_MULTIPROC_DIR, and the parent serves their sum.
The folder must be fresh at each start and the run's own (old or another worker's files would
add their counts), and it must be set before prometheus-client is imported, which this module
does not do at import.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def use_fresh_multiprocess_dir() -> Path:
    """An empty folder of this run's own for its value files: a new one inside the folder the
    environment names (else in the temporary folder), removed at exit, and set in the
    environment, which forked children inherit. Never the named folder itself: a second worker
    on the host with the same setting would empty it under the first and serve its values."""
    if "shared.ops.metrics" in sys.modules:
        raise RuntimeError("multiprocess mode must be chosen before any metric exists")
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        Path(given).mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="memory-pool-metrics-", dir=given or None))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    os.environ[MULTIPROC_ENV] = str(folder)
    # prometheus-client picks its value class at import; it may be imported already.
    from prometheus_client import values

    values.ValueClass = values.get_value_class()
    return folder


def serve_multiprocess_metrics(host: str, port: int) -> None:
    """Serve the sum over every process of this run (a thread of this process)."""
    from prometheus_client import CollectorRegistry, multiprocess, start_http_server

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    start_http_server(port, addr=host, registry=registry)


def serve_process_metrics(host: str, port: int) -> None:
    """Serve this process's metrics (the scheduler: one process)."""
    from prometheus_client import start_http_server

    start_http_server(port, addr=host)


def mark_dead_children() -> None:
    """A pool child that exits has its live gauges dropped (Celery's worker_process_shutdown
    runs in the child itself)."""
    from celery.signals import worker_process_shutdown
    from prometheus_client import multiprocess

    def mark(**_: object) -> None:
        multiprocess.mark_process_dead(os.getpid())

    worker_process_shutdown.connect(mark, weak=False)

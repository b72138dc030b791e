"""What machine a run happened on: cores, CPU model, RAM, load, and process RSS from /proc."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def ram_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 1024 / 1024
    return 0.0


def rss_mib(pid: int) -> float:
    """VmRSS of a process in MiB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def describe() -> str:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"machine: nproc={os.cpu_count()}, CPU {cpu_model()}, RAM {ram_gib():.1f} GiB, "
        f"Python {platform.python_version()}, load average at start {load}"
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RssSampler:
    """Peak VmRSS of some processes, sampled in a background thread."""

    def __init__(self, pids: dict[str, int], interval: float = 0.2) -> None:
        import threading

        self.pids = pids
        self.peak: dict[str, float] = dict.fromkeys(pids, 0.0)
        self.first: dict[str, float] = {name: rss_mib(pid) for name, pid in pids.items()}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            for name, pid in self.pids.items():
                self.peak[name] = max(self.peak[name], rss_mib(pid))

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

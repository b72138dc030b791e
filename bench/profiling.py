"""py-spy sampling of a running benchmark process, summarised by function and by package."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

from bench.procs import VENV_BIN

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>.*?)(?::\d+)?\)$")


def py_spy() -> str | None:
    candidate = VENV_BIN / "py-spy"
    return str(candidate) if candidate.exists() else shutil.which("py-spy")


def start(
    pid: int, seconds: float, out: Path, rate: int = 200, *, wall: bool = False
) -> subprocess.Popen | None:
    """Sample `pid` for `seconds` (raw collapsed stacks); None when py-spy is not installed.

    Default: only the thread holding the GIL (Python CPU time). `wall`: every thread, idle
    ones too, so waiting on I/O shows (for a single-threaded worker, where its time goes).
    """
    exe = py_spy()
    if exe is None:
        return None
    argv = [
        exe,
        "record",
        "--pid",
        str(pid),
        "--duration",
        str(max(1, int(seconds))),
        "--rate",
        str(rate),
        "--format",
        "raw",
        "--output",
        str(out),
        "--nonblocking",
    ]
    argv.append("--idle" if wall else "--gil")
    log = out.with_suffix(".log").open("wb")
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)


def _package(path: str) -> str:
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    if "/lib/python3" in path:
        rest = path.split("/lib/python3", 1)[1].split("/", 2)
        return "stdlib:" + (rest[1].removesuffix(".py") if len(rest) > 1 else "?")
    for top in ("api", "shared", "workers", "memory_pool", "bench", "tests"):
        if f"/{top}/" in path or path.startswith(f"{top}/"):
            return f"memory-pool:{top}"
    return path


def _frame(raw: str) -> tuple[str, str]:
    match = _FRAME.match(raw.strip())
    if not match:
        return raw.strip(), "?"
    file = match.group("file")
    return f"{match.group('func')} ({Path(file).name})", _package(file)


def summarize(path: Path, top: int = 12, *, under: str | None = None) -> str:
    """Top functions by inclusive and self samples, and self samples by package."""
    inclusive: Counter[str] = Counter()
    self_time: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    total = 0
    if not path.exists():
        log = path.with_suffix(".log")
        return "(py-spy wrote no profile) " + (log.read_text()[-500:] if log.exists() else "")
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_frame(f) for f in stack.split(";") if f and not f.startswith("process ")]
        if under is not None:
            names = [name for name, _ in frames]
            if under not in names:
                continue
            frames = frames[names.index(under) :]
        if not frames:
            continue
        total += n
        for name in {name for name, _ in frames}:
            inclusive[name] += n
        self_time[frames[-1][0]] += n
        packages[frames[-1][1]] += n
    if not total:
        return "(no samples)"
    lines = [f"{total} samples", "", "self time by package:"]
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in packages.most_common(top)]
    lines += ["", "self time by function:"]
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in self_time.most_common(top)]
    lines += ["", "inclusive time by function:"]
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in inclusive.most_common(top + 8)]
    return "\n".join(lines)

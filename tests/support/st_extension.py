"""st-qdrant-memory's own index.js (the SillyTavern extension, pinned) for the tests that run it
in node against memory-pool, and its runner: tests/support/st_extension_harness.js loads it with
only SillyTavern's globals stubbed and runs a scenario of its real functions.

The file is not kept in this repository (its repository states no license): `make install-test`
puts it once into .cache/, checked against its SHA-256, as tests/support/minilm.py does the
model. It takes it from GitHub, or, on a machine that reaches no GitHub, from a git clone of
st-qdrant-memory that holds the pinned commit (`MEMORY_POOL_TEST_ST_EXTENSION_GIT`, its git
directory). `MEMORY_POOL_TEST_ST_EXTENSION` may name a copy of the file instead.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
COMMIT = "707c49739c36f5f5dc853cff2ebbf885fee58d40"  # index.js 3.1.3
SHA256 = "c6cd5a4ff066ca4786c25d2560a09357420589248fb5bdcf51c81acba0f8e1a7"
SOURCE = f"https://raw.githubusercontent.com/HO-git/st-qdrant-memory/{COMMIT}/index.js"
CACHE = REPO_ROOT / ".cache" / "st-qdrant-memory" / COMMIT / "index.js"
HARNESS = Path(__file__).with_name("st_extension_harness.js")
NODE = "node"
RUN_TIMEOUT = 60.0


def candidates() -> list[Path]:
    configured = os.environ.get("MEMORY_POOL_TEST_ST_EXTENSION")
    return [*([Path(configured)] if configured else []), CACHE]


def _pinned(path: Path) -> bool:
    return path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == SHA256


def index_js() -> Path | None:
    """The pinned index.js: the configured copy or the downloaded one (None: neither)."""
    return next((path for path in candidates() if _pinned(path)), None)


def download(destination: Path = CACHE) -> Path:
    with urllib.request.urlopen(SOURCE, timeout=60) as answer:
        content = answer.read()
    return _kept(content, SOURCE, destination)


def from_git(git_dir: Path, destination: Path = CACHE) -> Path:
    """The pinned index.js out of a clone's history (`git show <commit>:index.js`)."""
    found = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{COMMIT}:index.js"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    if found.returncode != 0:
        raise RuntimeError(f"{git_dir} has no {COMMIT}:index.js: {found.stderr.decode()[-300:]}")
    return _kept(found.stdout, str(git_dir), destination)


def _kept(content: bytes, origin: str, destination: Path) -> Path:
    digest = hashlib.sha256(content).hexdigest()
    if digest != SHA256:
        raise RuntimeError(f"{origin} has SHA-256 {digest}, expected {SHA256}")
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_bytes(content)
    return destination


def fetched() -> Path:
    """The pinned index.js put into .cache/: from the configured clone, else from GitHub."""
    clone = os.environ.get("MEMORY_POOL_TEST_ST_EXTENSION_GIT")
    if clone:
        return from_git(Path(clone))
    return download()


def node() -> str | None:
    return shutil.which(NODE)


def run_scenario(index: Path, scenario: dict[str, Any]) -> dict[str, Any]:
    """Runs the harness in node with this scenario (its steps and settings); its results."""
    found = subprocess.run(
        [NODE, str(HARNESS), str(index)],
        input=json.dumps(scenario),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    if found.returncode != 0:
        raise AssertionError(f"the harness failed ({found.returncode}):\n{found.stderr[-4000:]}")
    lines = found.stdout.strip().splitlines()
    assert lines, f"the harness printed nothing:\n{found.stderr[-4000:]}"
    return dict(json.loads(lines[-1]))


def main() -> None:
    found = index_js()
    print(f"st-qdrant-memory index.js: {found or fetched()}")


if __name__ == "__main__":
    main()

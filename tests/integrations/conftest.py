"""Hermes Agent 0.19.0 itself (its MemoryProvider, plugin loader and MemoryManager).

`make install-test` installs it with --no-deps into .venv/hermes-agent, outside site-packages:
its wheel has top-level modules (`cli`, `utils`, `tools`, …) that would shadow memory-pool's.
The folder is put at the END of sys.path, so memory-pool's own modules always win.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERMES_AGENT_DIR = Path(sys.prefix) / "hermes-agent"
HERMES_AGENT_VERSION = "0.19.0"


@pytest.fixture(scope="session")
def hermes_agent() -> Iterator[Path]:
    metadata = HERMES_AGENT_DIR / f"hermes_agent-{HERMES_AGENT_VERSION}.dist-info" / "METADATA"
    if not metadata.is_file():
        missing = f"no hermes-agent {HERMES_AGENT_VERSION} in {HERMES_AGENT_DIR}"
        pytest.fail(f"{missing}: run make install-test")
    sys.path.append(str(HERMES_AGENT_DIR))
    try:
        yield HERMES_AGENT_DIR
    finally:
        sys.path.remove(str(HERMES_AGENT_DIR))

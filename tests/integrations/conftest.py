"""Hermes Agent 0.19.0 itself (its MemoryProvider, plugin loader and MemoryManager), a live
memory-pool for the Hermes tests, and a Hermes home with the provider installed.

`make install-test` installs it with --no-deps into .venv/hermes-agent, outside site-packages:
its wheel has top-level modules (`cli`, `utils`, `tools`, …) that would shadow memory-pool's.
The folder is put at the END of sys.path, so memory-pool's own modules always win.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_pool.main import app
from tests.integrations.hermes_support import AGENTS_FILE, ENV_VARS, MODULE, forget_modules
from tests.support.embedding_server import EmbeddingServer
from tests.support.live_server import Live, fresh_live_memory_pool
from tests.support.redis_server import RedisServer

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


@pytest.fixture(scope="module")
def live(
    redis_server: RedisServer,
    embedding_server: EmbeddingServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Live]:
    """memory-pool with the Hermes tests' agent, over real HTTP (one per test module)."""
    data_dir = tmp_path_factory.mktemp("hermes")
    with fresh_live_memory_pool(redis_server, embedding_server, data_dir, AGENTS_FILE) as up:
        yield up


@pytest.fixture
def hermes_home(
    tmp_path: Path, hermes_agent: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """A fresh HERMES_HOME with the plugin installed by `memory-pool hermes install`."""
    home = tmp_path / "hermes-home"
    result = CliRunner().invoke(app, ["hermes", "install", "--hermes-home", str(home)])
    assert result.exit_code == 0, result.output
    monkeypatch.setenv("HERMES_HOME", str(home))
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    yield home
    forget_modules(MODULE)

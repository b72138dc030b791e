"""`memory-pool hermes install`: where the plugin goes, re-installs, and what it never touches."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_pool.main import app

ROOT = Path(__file__).resolve().parents[2]

PLUGIN_FILES = {
    "__init__.py", "config.py", "sender.py", "tools.py", "turns.py", "plugin.yaml", "README.md",
    "memory_pool_client.py",
}  # fmt: skip


def install(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["hermes", "install", *args])
    return result.exit_code, result.output


def test_installs_into_hermes_home_from_the_environment_and_reinstalls_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    code, output = install()
    folder = tmp_path / "plugins" / "memory-pool"
    assert code == 0, output
    assert {p.name for p in folder.iterdir()} == PLUGIN_FILES
    assert "memory.provider: memory-pool" in output

    (folder / "left-over.py").write_text("# from an older version\n")
    code, output = install("--hermes-home", str(tmp_path))
    assert code == 0, output
    assert {p.name for p in folder.iterdir()} == PLUGIN_FILES
    assert [p.name for p in (tmp_path / "plugins").iterdir()] == ["memory-pool"]


def test_refuses_to_replace_a_folder_it_did_not_install(tmp_path: Path) -> None:
    foreign = tmp_path / "plugins" / "memory-pool"
    foreign.mkdir(parents=True)
    (foreign / "__init__.py").write_text("# someone else's plugin\n")
    code, output = install("--hermes-home", str(tmp_path))
    assert code == 2
    assert "holds something else" in output
    assert (foreign / "__init__.py").read_text() == "# someone else's plugin\n"


def test_the_client_is_copied_as_a_file_over_a_pip_installs_folder(tmp_path: Path) -> None:
    """The folder `memory-pool-hermes install` writes is memory-pool's: replaced, not refused."""
    folder = tmp_path / "plugins" / "memory-pool"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("from memory_pool_hermes import MemoryPoolProvider\n")
    (folder / "plugin.yaml").write_text("name: memory-pool\n")
    code, output = install("--hermes-home", str(tmp_path))
    assert code == 0, output
    assert {p.name for p in folder.iterdir()} == PLUGIN_FILES
    client = folder / "memory_pool_client.py"
    assert not client.is_symlink()
    assert client.read_bytes() == (ROOT / "client" / "http_client.py").read_bytes()
    assert (ROOT / "integrations" / "hermes" / "memory_pool_client.py").is_symlink()

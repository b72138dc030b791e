"""`memory-pool hermes install`: where the plugin goes, re-installs, and what it never touches."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_pool.main import app

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

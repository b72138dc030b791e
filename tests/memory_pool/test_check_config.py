"""Tests of `memory-pool check-config`: a bad agents file fails naming file, key and problem."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_pool.main import app


@pytest.fixture(autouse=True)
def no_config_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORY_POOL_CONFIG", raising=False)


def test_lists_agents(tmp_path: Path) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text("agents:\n  - name: Dr. Smith\n    self_speaker: Smith\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["check-config", "--config", str(path)])
    assert result.exit_code == 0, result.output
    assert "agent Dr. Smith: collection mem_dr_smith, self Smith" in result.output
    assert "unlisted agents: refused" in result.output


def test_bad_file_exits_2_with_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    path.write_text('[[agents]]\nname = "x"\nchunk_max_chars = 0\n', encoding="utf-8")
    result = CliRunner().invoke(app, ["check-config", "--config", str(path)])
    assert result.exit_code == 2
    assert f"{path}: agents[0].chunk_max_chars: Input should be greater than 0" in result.output

"""memory-pool-hermes as pip installs it: the wheel built from integrations/hermes/, installed
(--no-deps: httpx is here) into a folder of its own, and found by Hermes 0.19.0's own loader."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from memory_pool.main import app
from tests.integrations.hermes_support import (
    AGENT,
    ENV_VARS,
    MODULE,
    PACKAGE,
    PLUGIN,
    configure,
    forget_modules,
    initialized,
    load_provider,
)
from tests.support.live_server import Live

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "integrations" / "hermes"
GROUP = "hermes_agent.memory_providers"
PACKAGE_FILES = {
    "__init__.py", "config.py", "install.py", "memory_pool_client.py", "sender.py", "tools.py",
    "turns.py", "plugin.yaml", "README.md",
}  # fmt: skip
PIP_SECONDS = 240  # the build fetches hatchling into pip's isolated build environment


def pip(*args: str) -> None:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=PIP_SECONDS)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    pip("wheel", "--no-deps", "--wheel-dir", str(out), str(SOURCE))
    [built] = out.glob("memory_pool_hermes-*.whl")
    return built


@pytest.fixture(scope="module")
def site(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    pip("install", "--no-deps", "--no-index", "--target", str(target), str(wheel))
    return target


@pytest.fixture
def pip_home(
    site: Path, tmp_path: Path, hermes_agent: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """A Hermes home, with the pip-installed package importable (as in Hermes' environment)."""
    home = tmp_path / "hermes-home"
    home.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("HERMES_HOME", str(home))
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    yield home
    forget_modules(MODULE, PACKAGE)


def test_the_wheel_is_the_provider_with_memory_pools_client(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        package = {n.split("/", 1)[1] for n in names if n.startswith(f"{PACKAGE}/")}
        client = archive.read(f"{PACKAGE}/memory_pool_client.py")
        [info] = {n.split("/")[0] for n in names if ".dist-info/" in n}
        metadata = archive.read(f"{info}/METADATA").decode()
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    assert package == PACKAGE_FILES
    assert client == (ROOT / "client" / "http_client.py").read_bytes()
    assert (SOURCE / "memory_pool_client.py").resolve() == ROOT / "client" / "http_client.py"
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert requires == ["Requires-Dist: httpx>=0.27"]
    assert f"[{GROUP}]\nmemory-pool = {PACKAGE}:register" in entry_points
    assert f"memory-pool-hermes = {PACKAGE}.install:main" in entry_points
    version = yaml.safe_load((SOURCE / "plugin.yaml").read_text())["version"]
    assert info == f"memory_pool_hermes-{version}.dist-info"


@pytest.fixture(scope="module")
def hatchling(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The build backend, for its build_sdist hook (pip builds no sdist)."""
    target = tmp_path_factory.mktemp("hatchling")
    pip("install", "--no-compile", "--target", str(target), "hatchling>=1.19")
    return target


def test_a_wheel_built_from_the_sdist_carries_memory_pools_client(
    hatchling: Path, tmp_path: Path
) -> None:
    """`python -m build` (and so any published release) builds the wheel from the sdist: the
    sdist held memory_pool_client.py as the symbolic link to ../../client/http_client.py, which
    dangles once unpacked, so that wheel had no client and its package could not import."""
    code = f"from hatchling.build import build_sdist; build_sdist({str(tmp_path)!r})"
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(hatchling)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=SOURCE, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [sdist] = tmp_path.glob("memory_pool_hermes-*.tar.gz")
    client = (ROOT / "client" / "http_client.py").read_bytes()
    with tarfile.open(sdist) as archive:
        [member] = [m for m in archive.getmembers() if m.name.endswith("/memory_pool_client.py")]
        assert member.isfile(), member.linkname
        assert archive.extractfile(member).read() == client  # type: ignore[union-attr]
    pip("wheel", "--no-deps", "--wheel-dir", str(tmp_path / "wheel"), str(sdist))
    [built] = (tmp_path / "wheel").glob("memory_pool_hermes-*.whl")
    with zipfile.ZipFile(built) as archive:
        package = {n.split("/", 1)[1] for n in archive.namelist() if n.startswith(f"{PACKAGE}/")}
        assert package == PACKAGE_FILES
        assert archive.read(f"{PACKAGE}/memory_pool_client.py") == client


def test_hermes_loads_the_pip_installed_provider(site: Path, pip_home: Path) -> None:
    from agent.memory_provider import MemoryProvider
    from memory_pool_hermes.install import main
    from plugins.memory import discover_memory_providers

    assert main(["install", "--hermes-home", str(pip_home)]) == 0
    folder = pip_home / "plugins" / PLUGIN
    assert sorted(p.name for p in folder.iterdir()) == ["__init__.py", "plugin.yaml"]
    assert (site / "bin" / "memory-pool-hermes").is_file()

    provider = load_provider()
    assert isinstance(provider, MemoryProvider)
    assert type(provider).__module__ == PACKAGE
    assert sys.modules[PACKAGE].__file__ == str(site / PACKAGE / "__init__.py")
    assert [s["name"] for s in provider.get_tool_schemas()] == [
        "memory_pool_search", "memory_pool_remember",
    ]  # fmt: skip
    description = yaml.safe_load((SOURCE / "plugin.yaml").read_text())["description"]
    found = [(name, text) for name, text, _ in discover_memory_providers() if name == PLUGIN]
    assert found == [(PLUGIN, description)]


def test_newer_hermes_finds_it_by_its_entry_point(pip_home: Path) -> None:
    """0.19.0 reads no entry point for memory providers; later releases read this group."""
    from plugins.memory import _ProviderCollector

    [entry] = [e for e in importlib.metadata.entry_points(group=GROUP) if e.name == PLUGIN]
    collector = _ProviderCollector()
    entry.load()(collector)
    assert type(collector.provider).__module__ == PACKAGE
    assert collector.provider.name == PLUGIN


def test_the_pip_installed_tools_work_against_memory_pool(live: Live, pip_home: Path) -> None:
    from memory_pool_hermes.install import install_shim

    install_shim(pip_home)
    configure(pip_home, live.url)
    provider = initialized(pip_home, "pip-1", user_id="u-pip")
    assert type(provider).__module__ == PACKAGE
    fact = "Alex keeps the spare key to the boathouse under the blue flowerpot"
    kept = json.loads(provider.handle_tool_call("memory_pool_remember", {"fact": fact}))
    assert kept["stored"] is True and kept["duplicate"] is False, kept
    provider.sync_turn(
        "where is the boathouse key?", "under the blue flowerpot", session_id="pip-1"
    )
    provider.shutdown()
    live.stack.flush(AGENT)

    other = initialized(pip_home, "pip-2", agent_context="subagent")
    found = json.loads(other.handle_tool_call("memory_pool_search", {"query": "boathouse key"}))
    skipped = json.loads(other.handle_tool_call("memory_pool_remember", {"fact": fact + "!"}))
    other.shutdown()
    assert found["count"] >= 1 and "flowerpot" in found["memories"][0]["text"]
    assert skipped["stored"] is False and "subagent" in skipped["reason"]


def test_either_installer_replaces_the_others_folder_and_no_other(pip_home: Path) -> None:
    from memory_pool_hermes.install import main

    folder = pip_home / "plugins" / PLUGIN
    assert main(["install", "--hermes-home", str(pip_home)]) == 0
    result = CliRunner().invoke(app, ["hermes", "install", "--hermes-home", str(pip_home)])
    assert result.exit_code == 0, result.output
    assert (folder / "memory_pool_client.py").is_file()
    assert main(["install", "--hermes-home", str(pip_home)]) == 0
    assert sorted(p.name for p in folder.iterdir()) == ["__init__.py", "plugin.yaml"]

    (folder / "__init__.py").write_text("# someone else's plugin\n")
    assert main(["install", "--hermes-home", str(pip_home)]) == 2
    assert (folder / "__init__.py").read_text() == "# someone else's plugin\n"

"""scripts/test-tools.sh, the one list of system tools `make test` installs, run for real with a
PATH of our making: fake apt-get, id and sudo record what they were asked and act as told."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "test-tools.sh"
TOOLS = {
    "redis-server": "redis-server",
    "chromium": "chromium",
    "chromedriver": "chromium-driver",
    "prometheus": "prometheus",
    "docker-compose": "docker-compose",
    "git": "git",
    "node": "nodejs",  # st-qdrant-memory's own index.js runs in it (tests/integrations)
    "venv": "python3-venv",
}
# what the script itself runs, taken from the real system
SYSTEM = ("bash", "mktemp", "rm", "timeout")

FAKE_APT = """#!/bin/bash
PATH=/usr/bin:/bin  # the real apt-get runs with the whole system
echo "apt-get $*" >> "$CALLS"
case "$1" in
  update) [ "$APT" = broken ] && exit 100; touch "$STATE/updated"; exit 0 ;;
  install)
    [ "$APT" = broken ] && exit 100
    [ "$APT" = hang ] && { echo "apt-get: 0% [Waiting for headers]"; sleep 30; }
    [ "$APT" = stale ] && [ ! -e "$STATE/updated" ] && exit 100
    for package in "$@"; do
      case "$package" in
        chromium-driver) tool=chromedriver ;;
        nodejs) tool=node ;;
        python3-venv) tool=venv ;;
        -*) continue ;;
        *) tool=$package ;;
      esac
      [ "$APT" = hollow ] && continue
      [ "$package" = install ] && continue
      printf '#!/bin/sh\\n' > "$TOOLBIN/$tool"
      chmod +x "$TOOLBIN/$tool"
    done ;;
esac
"""
FAKE_ID = '#!/bin/bash\n[ "$1" = -u ] && echo "$UID_AS"\n'
FAKE_SUDO = (
    '#!/bin/bash\necho "sudo $*" >> "$CALLS"\n[ "$1" = -n ] && shift\n'
    '[ "$1" = true ] && exit 0\nexec "$@"\n'
)


@dataclass
class Machine:
    """A PATH with the system's basics, a folder of tools, and a log of apt-get's calls."""

    root: Path

    def __post_init__(self) -> None:
        self.bin = self.root / "bin"
        self.tools = self.root / "tools"
        self.state = self.root / "state"
        for folder in (self.bin, self.tools, self.state):
            folder.mkdir()
        # Python with its venv module, as the script asks it (PYTHON): present or not
        self.fake("python", '#!/bin/bash\n[ -e "$TOOLBIN/venv" ]\n')
        for name in SYSTEM:
            found = shutil.which(name)
            assert found, name
            (self.bin / name).symlink_to(found)
        self.calls = self.root / "calls.log"
        self.calls.touch()
        self.fake("id", FAKE_ID)

    def fake(self, name: str, text: str) -> None:
        (self.bin / name).write_text(text)
        (self.bin / name).chmod(0o755)

    def have(self, *tools: str) -> None:
        for tool in tools:
            self.fake_tool(tool)

    def fake_tool(self, tool: str) -> None:
        (self.tools / tool).write_text("#!/bin/sh\n")
        (self.tools / tool).chmod(0o755)

    def run(
        self, *, uid: int = 0, apt: str = "ok", **extra: str
    ) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": f"{self.bin}:{self.tools}",
            "CALLS": str(self.calls),
            "STATE": str(self.state),
            "TOOLBIN": str(self.tools),
            "UID_AS": str(uid),
            "APT": apt,
            "HOME": str(self.root),
            "PYTHON": str(self.bin / "python"),
            "VENV": str(self.root / "no-venv-yet"),
            "TEST_TOOLS_APT_TIMEOUT": "2",
            **extra,
        }
        return subprocess.run(
            [str(self.bin / "bash"), str(SCRIPT)],
            env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    def logged(self) -> list[str]:
        return self.calls.read_text().splitlines()


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    return Machine(tmp_path)


def test_a_machine_with_every_tool_runs_no_apt_get_and_no_sudo(machine: Machine) -> None:
    machine.have(*TOOLS)
    machine.fake("apt-get", FAKE_APT)
    machine.fake("sudo", FAKE_SUDO)
    for uid in (0, 1000):
        done = machine.run(uid=uid)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert machine.logged() == []


def test_missing_tools_are_installed_from_their_packages(machine: Machine) -> None:
    machine.have("redis-server", "chromium", "docker-compose", "git", "node", "venv")
    machine.fake("apt-get", FAKE_APT)
    done = machine.run()
    assert done.returncode == 0, done.stderr
    # the browser's driver as Debian recommends it; Prometheus without its extras
    assert machine.logged() == [
        "apt-get install -y -qq chromium-driver",
        "apt-get install -y -qq --no-install-recommends prometheus",
    ]
    assert "chromium-driver prometheus" in done.stderr
    assert machine.run().returncode == 0
    assert len(machine.logged()) == 2  # the second run installs nothing


def test_stale_package_lists_are_refreshed_once(machine: Machine) -> None:
    machine.have(*(tool for tool in TOOLS if tool != "prometheus"))
    machine.fake("apt-get", FAKE_APT)
    done = machine.run(apt="stale")
    assert done.returncode == 0, done.stderr
    assert machine.logged() == [
        "apt-get install -y -qq --no-install-recommends prometheus",
        "apt-get update -qq",
        "apt-get install -y -qq --no-install-recommends prometheus",
    ]


def test_a_user_with_sudo_installs_through_it(machine: Machine) -> None:
    machine.have(*(tool for tool in TOOLS if tool != "git"))
    machine.fake("apt-get", FAKE_APT)
    machine.fake("sudo", FAKE_SUDO)
    done = machine.run(uid=1000)
    assert done.returncode == 0, done.stderr
    assert machine.logged()[0] == "sudo -n true"
    assert "apt-get install -y -qq --no-install-recommends git" in machine.logged()


def test_python_without_its_venv_module_gets_it(machine: Machine) -> None:
    # Debian's python3 comes without ensurepip; make needs it to create .venv
    machine.have(*(tool for tool in TOOLS if tool != "venv"))
    machine.fake("apt-get", FAKE_APT)
    done = machine.run()
    assert done.returncode == 0, done.stderr
    assert machine.logged() == ["apt-get install -y -qq --no-install-recommends python3-venv"]


def _refused(done: subprocess.CompletedProcess[str], reason: str) -> None:
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    # apt-get's own output stays in its file: the notice that it runs, then the one line
    assert len(lines) <= 2, lines
    assert lines[-1].startswith(
        "make test: missing chromedriver prometheus; install the Debian packages "
        f"chromium-driver prometheus ({reason}"
    ), lines[-1]


@pytest.mark.parametrize(
    ("setup", "uid", "apt", "reason"),
    [
        ("no apt-get", 0, "ok", "no apt-get on this machine)"),
        ("no root", 1000, "ok", "not root and no sudo to run apt-get)"),
        ("no package index", 0, "broken", "apt-get update failed; its output: /"),
        ("a stalled download", 0, "hang", "apt-get install timed out after 2s; its output: /"),
        ("packages without the tools", 0, "hollow", "installed, yet not on the PATH)"),
    ],
)
def test_tools_that_cannot_be_installed_stop_the_run_at_once_with_one_line(
    machine: Machine, setup: str, uid: int, apt: str, reason: str
) -> None:
    machine.have("redis-server", "chromium", "docker-compose", "git", "node", "venv")
    if setup != "no apt-get":
        machine.fake("apt-get", FAKE_APT)
    started = time.monotonic()
    done = machine.run(uid=uid, apt=apt)
    assert time.monotonic() - started < 10
    _refused(done, reason)
    assert not (machine.tools / "prometheus").exists() or apt == "hollow"
    if apt == "hang":  # one wait only: a stalled download is not stale package lists
        assert [line for line in machine.logged() if "update" in line] == []


def test_a_python_that_is_not_there_is_named(machine: Machine) -> None:
    machine.have(*TOOLS)
    done = machine.run(PYTHON="/nowhere/python3.11")
    assert done.returncode == 1
    assert done.stderr == (
        "make test: no Python interpreter '/nowhere/python3.11' "
        "(PYTHON names the Python 3.11+ to use)\n"
    )


def test_an_existing_venv_needs_no_venv_module(machine: Machine) -> None:
    # made by uv or virtualenv: make uses it as it is
    machine.have(*(tool for tool in TOOLS if tool != "venv"))
    venv = machine.root / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(machine.bin / "bash")
    done = machine.run(VENV=str(machine.root / "venv"))
    assert (done.returncode, done.stderr) == (0, "")
    assert machine.logged() == []


def test_make_test_runs_the_script_before_anything_else() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "PYTHON=$(PYTHON) VENV=$(VENV) bash scripts/test-tools.sh" in makefile
    test = makefile.split("\ntest:\n", 1)[1].splitlines()
    # one after the other, the tools first, even under make -j
    assert [line.strip() for line in test[:3]] == [
        "@$(MAKE) --no-print-directory test-tools",
        "@$(MAKE) --no-print-directory lint",
        "$(BIN)/python -m pytest",
    ]
    ci = [
        line
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert ci[-1] == "make test"
    assert not any("apt-get" in line for line in ci)


def test_the_script_is_the_shell_it_claims() -> None:
    assert os.access(SCRIPT, os.X_OK)
    assert SCRIPT.read_text().startswith("#!/usr/bin/env bash\n")

"""Subprocesses a benchmark starts: started with a readiness check, always stopped by pid."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
START_TIMEOUT = 60.0


class StartError(RuntimeError):
    pass


class Proc:
    """One child process, its output in a log file; `stop()` ends it (and only it)."""

    def __init__(self, name: str, argv: Sequence[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = self.log_path.open("wb")
        self.popen = subprocess.Popen(
            list(argv), env=env, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float = START_TIMEOUT) -> str:
        """Wait until `text` appears in the output; returns that line."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.log().splitlines():
                if text in line:
                    return line
            if self.popen.poll() is not None:
                break
            time.sleep(0.05)
        raise StartError(f"{self.name} did not print {text!r}:\n{self.log()[-3000:]}")

    def wait_http(self, url: str, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        with httpx.Client(trust_env=False, timeout=2) as client:
            while time.monotonic() < deadline:
                if self.popen.poll() is not None:
                    break
                try:
                    if client.get(url).status_code < 500:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        raise StartError(f"{self.name} is not answering {url}:\n{self.log()[-3000:]}")

    def stop(self, timeout: float = 15.0) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=5)
        self._log.close()


def base_env(**extra: str) -> dict[str, str]:
    """The environment for children: no proxies for 127.0.0.1, the repo on the path."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(NO_PROXY="127.0.0.1,localhost", PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    env.update(extra)
    return env

"""`memory-pool-hermes install`: for a pip-installed provider, the plugins folder Hermes releases
that read no `hermes_agent.memory_providers` entry point (0.19.0 among them) look in.

It writes $HERMES_HOME/plugins/memory-pool/ with plugin.yaml and an __init__.py that only imports
the installed package, so `pip install -U memory-pool-hermes` upgrades the provider in place.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

PLUGIN = "memory-pool"
PACKAGE = "memory_pool_hermes"
SHIM = f'''"""memory-pool's Hermes memory provider, installed with pip (memory-pool-hermes).

This folder only points Hermes at the installed package: its register() calls
ctx.register_memory_provider. Written by `memory-pool-hermes install`; remove the folder to
uninstall it.
"""

from {PACKAGE} import MemoryPoolProvider, register

__all__ = ["MemoryPoolProvider", "register"]
'''


def installed_by_memory_pool(folder: Path) -> bool:
    """Whether `folder` holds memory-pool's provider (a copy, or this shim), not another's."""
    if (folder / "memory_pool_client.py").is_file():
        return True
    try:
        return f"from {PACKAGE} import" in (folder / "__init__.py").read_text(encoding="utf-8")
    except OSError:
        return False


def default_hermes_home() -> Path:
    return Path(os.environ.get("HERMES_HOME") or Path.home() / ".hermes")


def install_shim(hermes_home: Path) -> Path:
    """Write <hermes_home>/plugins/memory-pool/ (replacing an earlier install of memory-pool's
    provider, never another plugin's folder); returns the folder."""
    target = hermes_home.expanduser() / "plugins" / PLUGIN
    if target.exists() and not installed_by_memory_pool(target):
        raise FileExistsError(f"{target} holds something else; move it away first")
    staging = target.with_name(f".{PLUGIN}.installing")  # Hermes skips dot folders
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    shutil.copyfile(Path(__file__).with_name("plugin.yaml"), staging / "plugin.yaml")
    (staging / "__init__.py").write_text(SHIM, encoding="utf-8")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memory-pool-hermes")
    commands = parser.add_subparsers(dest="command", required=True)
    install = commands.add_parser(
        "install", help="Point Hermes' plugins folder at this pip-installed provider."
    )
    install.add_argument("--hermes-home", type=Path, help="default $HERMES_HOME, else ~/.hermes")
    options = parser.parse_args(argv)
    home = options.hermes_home or default_hermes_home()
    try:
        target = install_shim(home)
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"installed the Hermes plugin folder {target} (it imports {PACKAGE})")
    print(f"next: set `memory.provider: {PLUGIN}` in {home / 'config.yaml'} and the agent")
    print("(`hermes memory setup`, or MEMORY_POOL_AGENT)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`memory-pool hermes install`: the Hermes Agent memory provider copied into Hermes' plugins
folder, with memory-pool's HTTP client beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

hermes_app = typer.Typer(help="The Hermes Agent memory provider plugin.", no_args_is_help=True)

HERMES_PLUGIN = "memory-pool"
HERMES_PLUGIN_SOURCE = Path(__file__).resolve().parents[1] / "integrations" / "hermes"
# the pip distribution's files, not the plugin's
NOT_COPIED = ("__pycache__", "*.pyc", "pyproject.toml", "install.py")


def _ours(folder: Path) -> bool:
    """memory-pool's provider: a copy (with the client), or `memory-pool-hermes install`'s
    folder for the pip-installed package (integrations/hermes/install.py)."""
    if (folder / "memory_pool_client.py").is_file():
        return True
    try:
        return "from memory_pool_hermes import" in (folder / "__init__.py").read_text()
    except OSError:
        return False


def install_hermes_plugin(hermes_home: Path) -> Path:
    """Copy the plugin and memory-pool's HTTP client (as memory_pool_client.py) into
    <hermes_home>/plugins/memory-pool/, replacing an earlier install; returns the folder."""
    import shutil

    from client import http_client

    if not (HERMES_PLUGIN_SOURCE / "plugin.yaml").is_file():
        raise FileNotFoundError(f"no plugin sources at {HERMES_PLUGIN_SOURCE} (a checkout has)")
    target = hermes_home.expanduser() / "plugins" / HERMES_PLUGIN
    if target.exists() and not _ours(target):
        raise FileExistsError(f"{target} holds something else; move it away first")
    staging = target.with_name(f".{HERMES_PLUGIN}.installing")  # Hermes skips dot folders
    shutil.rmtree(staging, ignore_errors=True)
    # memory_pool_client.py is a link to client/http_client.py: copied as a file, and again
    # from the client itself (a checkout without links holds the link's path as text)
    shutil.copytree(HERMES_PLUGIN_SOURCE, staging, ignore=shutil.ignore_patterns(*NOT_COPIED))
    shutil.copyfile(http_client.__file__, staging / "memory_pool_client.py")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


@hermes_app.command("install")
def hermes_install(
    hermes_home: Annotated[
        Path | None,
        typer.Option("--hermes-home", help="Hermes' home; default $HERMES_HOME, else ~/.hermes."),
    ] = None,
) -> None:
    """Install the memory-pool memory provider into Hermes' plugins folder."""
    import os

    home = hermes_home or Path(os.environ.get("HERMES_HOME") or Path.home() / ".hermes")
    try:
        target = install_hermes_plugin(home)
    except OSError as exc:  # also the FileNotFoundError / FileExistsError above
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    typer.echo(f"installed the Hermes plugin in {target}")
    typer.echo(
        f"next: set `memory.provider: {HERMES_PLUGIN}` in {home / 'config.yaml'} and the agent "
        "(`hermes memory setup`, or MEMORY_POOL_AGENT); see integrations/hermes/README.md"
    )

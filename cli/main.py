"""The `memory-pool` command: its subcommands, each a thin call into the service."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from shared.agents import load_agents
from shared.errors import ConfigError
from shared.settings import Settings

app = typer.Typer(
    help="memory-pool: one long-term memory for an AI character across all its interfaces.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Subcommands below; each has --help."""


@app.command("check-config")
def check_config(
    config: Annotated[
        Path | None,
        typer.Option("--config", help="Agents file (YAML or TOML); default MEMORY_POOL_CONFIG."),
    ] = None,
) -> None:
    """Check the settings and the agents file, and list each agent's collection and speaker."""
    settings = Settings()
    path = config or settings.config_path
    try:
        agents = load_agents(path)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    typer.echo(f"embedding: {settings.embedding_provider} {settings.embedding_model}")
    if path is None:
        typer.echo("no agents file: any agent name is accepted (set MEMORY_POOL_CONFIG)")
    for agent in agents.listed:
        typer.echo(f"agent {agent.name}: collection {agent.collection_name}, self {agent.speaker}")
    if path is not None:
        unlisted = "accepted" if agents.accept_unlisted else "refused"
        typer.echo(f"unlisted agents: {unlisted}")


def main() -> None:
    app()

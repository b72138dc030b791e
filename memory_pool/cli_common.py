"""What the `memory-pool` subcommands share: the --config option, settings with the command line's
overrides, logging, and the servers a deployment's processes need."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, cast

import typer

from shared.agents import load_agents
from shared.errors import ConfigError
from shared.settings import Settings

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", help="Agents file (YAML or TOML); default MEMORY_POOL_CONFIG."),
]


def load_settings(config: Path | None = None, *, data_dir: Path | None = None) -> Settings:
    """The environment's settings, the --config and --data-dir given overriding them; an agents
    file that does not load ends the command here (exit 2)."""
    overrides = {"MEMORY_POOL_CONFIG": str(config)} if config else {}
    # keys are the settings' environment names (aliases), which mypy's pydantic plugin can't see
    settings = Settings(**cast(dict[str, Any], overrides))
    try:
        load_agents(settings.config_path)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    if data_dir is not None:
        settings = settings.model_copy(update={"data_dir": data_dir})
    return settings


def start_logging(settings: Settings, level: str = "INFO") -> None:
    """One configuration for every command (MEMORY_POOL_LOG_FORMAT: text or json)."""
    from shared.ops.log_setup import configure_logging

    configure_logging(settings.log_format, level)


def celery_logging(settings: Settings, level: str) -> None:
    """Celery configures no logging of its own once a setup_logging receiver exists: its lines
    go through ours, once each."""
    from celery.signals import setup_logging

    def ours(**_: object) -> None:
        start_logging(settings, level)

    setup_logging.connect(ours, weak=False)


MetricsPort = Annotated[
    int | None,
    typer.Option("--metrics-port", help="Serve Prometheus metrics on this port (off by default)."),
]
MetricsHost = Annotated[
    str, typer.Option("--metrics-host", help="Address for --metrics-port (compose: 0.0.0.0).")
]


def require_servers(settings: Settings, role: str) -> None:
    """Workers and the scheduler of a deployment need shared Redis and a Qdrant server."""
    if not settings.redis_url:
        typer.echo(f"error: `memory-pool {role}` needs REDIS_URL (the shared broker)", err=True)
        raise typer.Exit(code=2)
    if role == "worker" and not settings.qdrant_url:
        typer.echo(
            "error: `memory-pool worker` needs QDRANT_URL. Without it Qdrant runs embedded "
            "(Qdrant Edge), which only one process may open: `memory-pool serve` runs its "
            "worker inside itself.",
            err=True,
        )
        raise typer.Exit(code=2)

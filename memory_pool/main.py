"""The `memory-pool` command: its subcommands, each a thin call into the service. The
deployment's processes are here; moving a pool is in pool_cli.py, Hermes' plugin in
hermes_cli.py, the MCP server over stdio in mcp_cli.py."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from memory_pool import hermes_cli, mcp_cli, pool_cli
from memory_pool.cli_common import (
    ConfigOption,
    MetricsHost,
    MetricsPort,
    celery_logging,
    load_settings,
    require_servers,
    start_logging,
)
from shared.agents import load_agents

app = typer.Typer(
    help="memory-pool: one long-term memory for an AI character across all its interfaces.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Subcommands below; each has --help."""


@app.command("check-config")
def check_config(config: ConfigOption = None) -> None:
    """Check the settings and the agents file, and list each agent's collection and speaker."""
    settings = load_settings(config)
    agents = load_agents(settings.config_path)
    typer.echo(f"embedding: {settings.embedding_provider} {settings.embedding_model}")
    if settings.config_path is None:
        typer.echo("no agents file: any agent name is accepted (set MEMORY_POOL_CONFIG)")
    for agent in agents.listed:
        typer.echo(f"agent {agent.name}: collection {agent.collection_name}, self {agent.speaker}")
    if settings.config_path is not None:
        unlisted = "accepted" if agents.accept_unlisted else "refused"
        typer.echo(f"unlisted agents: {unlisted}")


@app.command()
def api(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (the Discord plugin's default).")] = 3102,
    config: ConfigOption = None,
) -> None:
    """Run only the HTTP API against REDIS_URL and QDRANT_URL (the compose `api` service)."""
    from api.app import create_app
    from memory_pool.http_server import HttpServer

    settings = load_settings(config)
    require_servers(settings, "api")
    start_logging(settings)
    server = HttpServer(create_app(settings), host, port)
    server.run()
    if not server.started:  # as uvicorn.run: the app could not start (the log says why)
        raise typer.Exit(3)


@app.command()
def worker(
    concurrency: Annotated[int, typer.Option(help="Worker processes (or threads).")] = 2,
    pool: Annotated[str, typer.Option(help="Celery pool: prefork, threads or solo.")] = "prefork",
    loglevel: Annotated[str, typer.Option(help="Log level.")] = "INFO",
    config: ConfigOption = None,
    metrics_port: MetricsPort = None,
    metrics_host: MetricsHost = "127.0.0.1",
) -> None:
    """Run a Celery worker that flushes conversations (scale with more of these)."""
    from memory_pool import metrics_server

    settings = load_settings(config)
    require_servers(settings, "worker")
    start_logging(settings, loglevel)
    celery_logging(settings, loglevel)
    if metrics_port is not None:
        # Before any metric exists: the pool's children write theirs to files.
        metrics_server.use_fresh_multiprocess_dir()
    from shared.agents import load_agents
    from workers.celery_app import make_celery, warm_chinese_words
    from workers.worker_context import WorkerContext

    # Read once, here: the warm-up needs the languages, and every pool child its agents.
    agents = load_agents(settings.config_path)
    celery_app = make_celery(settings, WorkerContext(settings, agents=agents))
    warm_chinese_words(agents.languages(), pool)
    if metrics_port is not None:
        metrics_server.mark_dead_children()
        metrics_server.serve_multiprocess_metrics(metrics_host, metrics_port)
    argv = ["worker", f"--concurrency={concurrency}", f"--loglevel={loglevel}", f"--pool={pool}"]
    celery_app.worker_main(argv)


@app.command()
def scheduler(
    config: ConfigOption = None,
    metrics_port: MetricsPort = None,
    metrics_host: MetricsHost = "127.0.0.1",
) -> None:
    """Run the sweep that hands due conversations to workers (exactly one per deployment)."""
    from memory_pool.metrics_server import serve_process_metrics
    from shared.runtime import redis_client
    from shared.state.buffers import Buffers
    from workers.celery_app import make_celery
    from workers.metrics import meter_scheduler
    from workers.scheduler import celery_scheduler

    settings = load_settings(config)
    require_servers(settings, "scheduler")
    start_logging(settings)
    if metrics_port is not None:
        serve_process_metrics(metrics_host, metrics_port)
    buffers = Buffers(
        redis_client(settings),
        dedupe_ttl_seconds=settings.dedupe_ttl_seconds,
        lease_seconds=settings.lease_seconds,
    )
    sweep = meter_scheduler(celery_scheduler(buffers, make_celery(settings), settings))
    logging.getLogger(__name__).info("scheduler started")
    try:
        sweep.run()
    except KeyboardInterrupt:
        sweep.stop()


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (the Discord plugin's default).")] = 3102,
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="Where Redis and Qdrant keep data; MEMORY_POOL_DATA_DIR."),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Run everything in one process with its data in one folder (what `make run` starts)."""
    from memory_pool.embedded_redis import EmbeddedRedisError
    from memory_pool.serve import ServeError, run_in_one_process

    settings = load_settings(config, data_dir=data_dir)
    start_logging(settings)
    try:
        code = run_in_one_process(settings, host=host, port=port)
    except (EmbeddedRedisError, ServeError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    raise typer.Exit(code=code)


@app.command()
def health(
    url: Annotated[str, typer.Option(help="The running memory-pool.")] = "http://127.0.0.1:3102",
) -> None:
    """Ask a running memory-pool for /health; exit 1 unless everything is ok."""
    import json

    import httpx

    try:
        response = httpx.get(f"{url.rstrip('/')}/health", timeout=10)
    except httpx.HTTPError as exc:
        typer.echo(f"error: {url} is not answering: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    report = response.json()
    typer.echo(json.dumps(report, indent=2, ensure_ascii=False))
    raise typer.Exit(code=0 if report.get("status") == "ok" else 1)


pool_cli.register(app)
mcp_cli.register(app)
app.add_typer(hermes_cli.hermes_app, name="hermes")


def main() -> None:
    app(prog_name="memory-pool")


if __name__ == "__main__":
    main()
